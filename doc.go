// Package handoff assembles one A2A agent: it reads the agent's YAML
// [Config], builds its card, its task engine and its transports, and serves
// them on one port until its context ends.
//
// # Following one request
//
//	cmd/handoff     LoadConfig → New → Agent.Serve (ctx from signal.NotifyContext)
//	Agent.Handler   the mux table: card and JWKS public; JSON-RPC, REST, gRPC, MCP and
//	                the admin routes through internal/a2ahttp's Face
//	a2ahttp         caller check on headers, one body limit, one request log; A2A 1.0,
//	                or 0.3 by the A2A-Version header; the JSON-RPC fast path
//	tasks.Engine    executor → skill; every event stored before anyone sees it
//	tasks.Store     task snapshot + event log → SSE streams, resubscribe
//
// Each hop is a direct call or a small interface wired in [New]; there is no
// init() registration and no package state.
package handoff
