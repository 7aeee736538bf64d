// Package a2ahttp is an agent's A2A HTTP face: what stands between a socket
// and the engine's a2asrv.RequestHandler. It negotiates the A2A version
// (1.0, or 0.3 by the A2A-Version header), authenticates callers on their
// headers before any body is read, bounds request bodies (size, read
// deadline, a budget of bytes held at once) and response writes (a stall
// timeout), mends the answers of a2a-go's transports that the bindings or
// widely used clients need otherwise, serves JSON-RPC's SendMessage,
// SendStreamingMessage and GetTask on a fast path, and bounds the
// connections the listener holds.
//
// # Following one request
//
//	ConnLimiter      accept: room for the connection, or a 503 and close
//	Face.Outermost   request log, write-stall guard
//	Face.JSONRPC     caller check → body limits → version → fast path | a2a-go
//	CallerHandler    the principal into a2a-go's call context → engine
//
// The root package builds the mux: it calls [New] once per handler with the
// engine behind a [CallerHandler], and mounts the face's routes with its own
// (the card, health, admin endpoints). This package knows nothing of skills,
// delegations or stores: it sees the engine as a2asrv.RequestHandler.
package a2ahttp
