// Package mcp connects an agent to its MCP tool servers and is the one road from "a tool call
// was proposed" to "a normalised result".
//
// A [Manager] runs one supervisor per configured server ([ServerConfig]): it connects with a
// deadline, re-lists the server's tools after every connect and every
// notifications/tools/list_changed, and reconnects with exponential backoff when a stdio
// process dies or an HTTP session is lost. A server that stays down is marked unavailable and
// its tools leave the catalog; the other servers keep serving.
//
// The catalog is published as immutable [Snapshot] values. Tools are named server__tool, and
// a snapshot's Version is a hash of the tool definitions it holds, so a caller can plan
// against one version and [Manager.Call] can refuse, with [OutcomeUnavailableTool], a tool
// that has gone or changed since: never a silent swap.
//
// Every call follows the same pipeline:
//
//	snapshot check → arguments validated against inputSchema → call with a deadline
//	→ normalise: isError, protocol errors, timeouts, lost connections, and
//	  structuredContent validated against the output schema → one [Outcome]
//
// Deciding whether a tool reads or writes is not the server's business: the caller says so in
// [CallRequest.ReadOnly], and that decides whether a timeout or a lost connection after the
// request was sent ends [OutcomeTimeout] or is retried (read) or ends
// [OutcomeUnknownOutcome] (write).
package mcp
