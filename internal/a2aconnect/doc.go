// Package a2aconnect serves the A2A 1.0 gRPC binding (service
// lf.a2a.v1.A2AService) through connectrpc.com/connect, so that a single
// http.Handler answers gRPC, gRPC-Web and Connect-protocol clients on top of
// any a2asrv.RequestHandler.
//
// It reuses a2a-go's generated messages (a2apb/v1) and converters (pbconv)
// rather than generating its own copy: two registrations of the same proto
// package panic at start-up. Handlers are therefore wired by hand, one per
// service method, with the default connect proto codec.
//
// Errors follow a2a-go's own gRPC server: a2a sentinel errors become the same
// status codes with a google.rpc.ErrorInfo detail carrying the A2A reason, so
// a2a-go's gRPC client maps them back to the same sentinels.
package a2aconnect
