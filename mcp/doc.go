// Package mcp connects an agent to its MCP tool servers and is the one road from "a tool call
// was proposed" to "a normalised, audited result".
//
// A [Manager] runs one supervisor per configured server ([ServerConfig]): it connects with a
// deadline, re-lists the server's tools after every connect and every
// notifications/tools/list_changed, and reconnects with exponential backoff when a stdio
// process dies or an HTTP session is lost. A server that stays down is marked unavailable and
// its tools leave the catalog; the other servers keep serving. [Manager.Reconfigure] applies a
// config reload: unchanged servers keep their sessions, the others are started, stopped or
// restarted.
//
// The catalog is published as immutable [Snapshot] values. Tools are named server__tool, and
// a snapshot's Version is a hash of the tool definitions it holds, so a caller can plan
// against one version and the call is refused, with [OutcomeUnavailableTool], when the tool
// has gone or changed since: never a silent swap.
//
// A [Pipeline] governs every call:
//
//	snapshot check → arguments validated against inputSchema → RFC 8785 digest of
//	{tool, arguments} → local [Contract] (effect, risk, approval, idempotency, timeout,
//	redaction, output schema, resources) → canonical resources → policy layers
//	(package [policy]: rules, grants from a [GrantStore], the contract's defaults)
//	→ pre_tool_call [Hook]s (may deny or ask, fail closed) → [Decision] allow | deny |
//	ask ([Approval] bound to the digest; a task or scope approval stores a grant)
//	→ call through the Manager, with a deadline, the caller's cancellation and the
//	idempotency key in _meta → normalise: isError, protocol errors, timeouts, lost
//	connections, structuredContent against the output schema → one [Outcome]
//	→ one [AuditRecord] ([BoltAudit]: durable, group-committed; it names the deciding
//	rule, its layer, the policy version and the resources) → post_tool_call hooks
//	(observe only, fail open)
//
// [Explain] and [Pipeline.Explain] give the policy's decision on a proposal without running
// it.
//
// Server annotations are never trusted: the contract says whether a tool reads, and only a
// read is retried after a lost connection; a write whose request was sent and not answered
// ends [OutcomeUnknownOutcome]. [Manager.Call] is the same road without the policy, for
// callers that govern calls themselves.
//
// # The other way
//
// A [Face] ([NewFace]) is the reverse road: it serves the agent's own skills to MCP hosts as
// tools over streamable HTTP, each tools/call one A2A task of the caller, run and governed
// by the agent's engine like any other.
package mcp
