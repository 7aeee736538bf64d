// Package console serves an agent's operator console at /console: its
// tasks (filtered by state, paged, live), a task's timeline (events,
// delegations and gate decisions, tool calls with their policy decision,
// artifacts as downloads), the approvals waiting (with Approve and Deny),
// peers, MCP servers, push deliveries and the ledger.
//
// A person signs in once with the agent's own credentials (an API key or a
// bearer JWT); the console keeps the credential on the server, in memory,
// and gives the browser a session cookie (HttpOnly, SameSite=Strict,
// Secure when served over TLS, expiring). Every request re-checks the
// credential through the agent's authenticator, so a revoked key or an
// expired token ends the session, and runs as that caller: the console
// reads tasks through the same engine methods and owner rules as A2A (a
// caller sees its own tasks; approvers see what they may approve), and its
// reports are the agent's own admin handlers. Every state change needs
// the session's CSRF token in a header, the pages are plain HTML, CSS and
// JavaScript embedded in the binary under a strict Content-Security-Policy,
// and the browser never receives a credential or an approval token.
//
// Flow of a request:
//
//	GET  /console/            the page (assets embedded with go:embed)
//	POST /console/api/session sign in: credential → Authenticate → session cookie + CSRF token
//	GET  /console/api/...     session → principal in ctx → Tasks / EventLog / Approvals / reports
//	POST /console/api/...     the same, after the CSRF check
//	GET  /console/api/stream  SSE: the caller's tasks as the engine commits them ([Console.Notify])
package console
