package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/grpc"

	"github.com/handoff-a2a/handoff"
	"github.com/handoff-a2a/handoff/internal/tck"
)

// The targets' names, as they appear in a [Result].
const (
	TargetHandoff = "handoff"
	TargetSDK     = "sdk"
	TargetLimit   = "limit"
)

const (
	jsonrpcPath       = "/a2a/jsonrpc" // where Handoff serves JSON-RPC; the SDK target mirrors it
	grpcSendProcedure = "/lf.a2a.v1.A2AService/SendMessage"
	conformancePath   = "examples/conformance/agent.yaml"
)

// builtinConformance is the agent of examples/conformance/agent.yaml, for a
// run outside the repository's root where that file is not found.
const builtinConformance = `name: Handoff Conformance Agent
description: Answers the A2A test kit's scripted messages, and echoes any other message.
auth:
  anonymous: true
capabilities:
  streaming: true
skills:
  - id: tck
    name: Conformance behaviour
    executor: tck
`

// target is one running server under load.
type target struct {
	name   string
	rpcURL map[Scenario]string // the JSON-RPC endpoint of each JSON-RPC scenario
	grpc   *connect.Client[a2apb.SendMessageRequest, a2apb.SendMessageResponse]
	taskID string // the task the get scenario reads
	stop   func() error
}

// startHTTP serves h on an ephemeral port as Handoff serves itself: HTTP/1.1
// and HTTP/2 without TLS, so no target gets a different HTTP stack.
func startHTTP(h http.Handler) (base string, stop func() error, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = srv.Serve(ln) }() // ErrServerClosed once stopped: nothing to report
	return "http://" + ln.Addr().String(), srv.Close, nil
}

// conformanceConfig loads the conformance agent's config, or builds the same
// agent in code when the file is not there. It says which it used.
func conformanceConfig() (*handoff.Config, string, error) {
	cfg, err := handoff.LoadConfig(conformancePath)
	if err == nil {
		return cfg, conformancePath, nil
	}
	if !errors.Is(err, handoff.ErrNoConfig) {
		return nil, "", err
	}
	cfg, err = handoff.ParseConfig("built-in conformance config", strings.NewReader(builtinConformance))
	return cfg, "built in (" + conformancePath + " not found)", err
}

// startHandoff serves the conformance agent through handoff.New and
// Agent.Serve, its durable store in dataDir.
func (g *generator) startHandoff(ctx context.Context, dataDir string, log *slog.Logger) (*target, string, error) {
	cfg, source, err := conformanceConfig()
	if err != nil {
		return nil, "", err
	}
	cfg.DataDir = dataDir
	agent, err := handoff.New(ctx, cfg, handoff.WithLogger(log))
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		agent.Close()
		return nil, "", err
	}
	// The agent stops when the bench does, not when the caller's ctx ends
	// mid-cell: stop waits for its orderly shutdown either way.
	serveCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- agent.Serve(serveCtx, ln) }()
	base := "http://" + ln.Addr().String()
	t := g.newTarget(TargetHandoff, base+jsonrpcPath, base)
	t.stop = func() error {
		cancel()
		return <-served
	}
	return t, source, nil
}

// startSDK serves a2a-go's own request handler, on its in-memory store and
// with Handoff's executor, behind a2a-go's JSON-RPC and gRPC bindings. The
// gRPC binding is grpc-go's server, on a port of its own.
func (g *generator) startSDK() (*target, error) {
	handler := a2asrv.NewHandler(tck.New())
	mux := http.NewServeMux()
	mux.Handle("POST "+jsonrpcPath, a2asrv.NewJSONRPCHandler(handler))
	base, stopHTTP, err := startHTTP(mux)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		stopHTTP()
		return nil, err
	}
	gs := grpc.NewServer()
	a2agrpc.NewHandler(handler).RegisterWith(gs)
	go func() { _ = gs.Serve(ln) }() // returns once stopped: nothing to report
	t := g.newTarget(TargetSDK, base+jsonrpcPath, "http://"+ln.Addr().String())
	t.stop = func() error {
		gs.Stop()
		return stopHTTP()
	}
	return t, nil
}

// startLimit serves the answers recorded from Handoff, unchanged, from the
// least a server can do: read the request, write fixed bytes. JSON-RPC
// scenarios get a path each, since the answer depends on the scenario;
// gRPC goes through connect, as Handoff's does, so the framing is paid.
func (g *generator) startLimit(rec *recording) (*target, error) {
	mux := http.NewServeMux()
	fixed := func(contentType string, body []byte) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", contentType)
			_, _ = w.Write(body)
		})
	}
	mux.Handle("POST /"+string(Send), fixed("application/json", rec.send))
	mux.Handle("POST /"+string(Stream), fixed("text/event-stream", rec.stream))
	mux.Handle("POST /"+string(Get), fixed("application/json", rec.get))
	mux.Handle(grpcSendProcedure, connect.NewUnaryHandler(grpcSendProcedure,
		func(context.Context, *connect.Request[a2apb.SendMessageRequest]) (*connect.Response[a2apb.SendMessageResponse], error) {
			return connect.NewResponse(rec.grpc), nil
		}))
	base, stop, err := startHTTP(mux)
	if err != nil {
		return nil, err
	}
	t := g.newTarget(TargetLimit, "", base)
	for _, sc := range []Scenario{Send, Stream, Get} {
		t.rpcURL[sc] = base + "/" + string(sc)
	}
	t.stop = stop
	return t, nil
}

func (g *generator) newTarget(name, rpcURL, grpcBase string) *target {
	return &target{
		name:   name,
		rpcURL: map[Scenario]string{Send: rpcURL, Stream: rpcURL, Get: rpcURL},
		grpc: connect.NewClient[a2apb.SendMessageRequest, a2apb.SendMessageResponse](
			g.h2c, grpcBase+grpcSendProcedure, connect.WithGRPC()),
	}
}

// recording is one answer of Handoff's per scenario, for the limit to replay.
type recording struct {
	send, stream, get []byte
	grpc              *a2apb.SendMessageResponse
}

// record makes one request of each scenario to t and keeps the answers; it
// also creates t's task for the get scenario.
func (g *generator) record(ctx context.Context, t *target) (*recording, error) {
	if err := g.createTask(ctx, t); err != nil {
		return nil, err
	}
	rec := &recording{}
	for _, r := range []struct {
		sc   Scenario
		into *[]byte
	}{{Send, &rec.send}, {Stream, &rec.stream}, {Get, &rec.get}} {
		body, err := g.callers(r.sc, t)()(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s on %s: %w", r.sc, t.name, err)
		}
		*r.into = bytes.Clone(body)
	}
	res, err := t.grpc.CallUnary(ctx, connect.NewRequest(g.grpcRequest()))
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", GRPC, t.name, err)
	}
	rec.grpc = res.Msg
	return rec, nil
}
