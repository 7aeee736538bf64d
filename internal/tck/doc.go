// Package tck implements the agent behind Handoff's conformance mode: an
// [a2asrv.AgentExecutor] that behaves the way the public A2A Technology
// Compatibility Kit (TCK) expects of a system under test.
//
// The TCK steers the agent in-band, through the prefix of the incoming
// message's messageId; the rest of the id is free (the TCK appends a unique
// suffix). [Executor] maps each prefix to a fixed script of A2A events:
//
//	tck-complete-task            completed, status message "Hello from TCK"
//	tck-artifact-text            completed with a text artifact
//	tck-artifact-file            completed with a raw file artifact (output.txt, text/plain)
//	tck-artifact-file-url        completed with a file URL artifact
//	tck-artifact-data            completed with a data artifact {"key":"value","count":42}
//	tck-message-response         a bare Message "Direct message response"; no task
//	tck-input-required           input-required, status message asks for input
//	tck-reject-task              rejected, status message "rejected"
//	tck-stream-001, -003,
//	tck-stream-ordering-001,
//	tck-stream-artifact-text,
//	tck-stream-artifact-file     working, one artifact, completed
//	tck-stream-002               completed, with no intermediate events
//	tck-stream-artifact-chunked  working, artifact "chunk-1 ", appended "chunk-2"
//	                             (last chunk), completed
//	test-resubscribe-message-id  working, a wait (10 s by default, see
//	                             [WithResubscribeDelay]), completed
//
// When several prefixes match, the longest wins, so "tck-artifact-file-url…"
// is never mistaken for "tck-artifact-file…".
//
// Any other message is echoed: the task completes and the completed status
// message (role agent) carries the text parts of the incoming message; a
// message without text completes with no status message. A message sent to
// an existing task (for example the answer to tck-input-required) completes
// that task the same way, echoing the new message, unless its own id starts
// with tck-input-required: then the task asks for input again.
//
// Cancel always moves the task to canceled. Every task event carries the
// task and context ids of the execution; the tck-message-response reply
// carries the context id only, since no task exists for it.
package tck
