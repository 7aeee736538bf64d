package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/handoff-a2a/handoff/mcp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// disowningServer lists tools it then answers for in odd ways, as real servers do: an unknown
// tool as a JSON-RPC error (the Go SDK) or as isError (the TypeScript SDK), and a plain
// JSON-RPC failure.
func disowningServer() *mcpsdk.Server {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "odd", Version: "1"}, nil)
	for _, name := range []string{"gone_rpc", "gone_iserror", "broken"} {
		mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: name}, func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
			return nil, nil, nil
		})
	}
	srv.AddReceivingMiddleware(func(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
		return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			switch name := req.(*mcpsdk.CallToolRequest).Params.Name; name {
			case "gone_rpc":
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `unknown tool "gone_rpc"`}
			case "gone_iserror":
				return &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "MCP error -32602: Tool gone_iserror not found"}}}, nil
			default:
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "boom"}
			}
		}
	})
	return srv
}

func inMemory(srv *mcpsdk.Server) func() (mcpsdk.Transport, error) {
	return func() (mcpsdk.Transport, error) {
		st, ct := mcpsdk.NewInMemoryTransports()
		if _, err := srv.Connect(context.Background(), st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}
}

// TestServerAnswers: unknown tools answered either way are unavailable_tool and trigger a
// fresh listing; other JSON-RPC errors are protocol errors, kept apart from tool errors.
func TestServerAnswers(t *testing.T) {
	m := start(t, []mcp.ServerConfig{{Name: "odd", Transport: mcp.TransportStdio, Command: "in-memory"}},
		mcp.WithTransportForTest("odd", inMemory(disowningServer())))
	waitReady(t, m, "odd")
	listings := status(m, "odd").Listings
	want(t, call(t, m, mcp.CallRequest{Tool: "odd__gone_rpc"}), mcp.OutcomeUnavailableTool)
	want(t, call(t, m, mcp.CallRequest{Tool: "odd__gone_iserror"}), mcp.OutcomeUnavailableTool)
	r := call(t, m, mcp.CallRequest{Tool: "odd__broken"})
	want(t, r, mcp.OutcomeProtocolError)
	if !strings.Contains(r.Err.Error(), "boom") {
		t.Fatalf("err %v", r.Err)
	}
	waitFor(t, m, "a relist after the server disowned a tool", func() bool { return status(m, "odd").Listings > listings })
}

// TestHTTPHeaders: configured headers, expanded from the environment, reach the server.
func TestHTTPHeaders(t *testing.T) {
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return disowningServer() }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	lookup := func(name string) (string, bool) { return "tok", name == "TOKEN" }
	m := start(t, []mcp.ServerConfig{
		{Name: "good", Transport: mcp.TransportHTTP, URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer ${TOKEN}"}},
		{Name: "unset", Transport: mcp.TransportHTTP, URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer ${NOPE}"}},
	}, mcp.WithLookupEnv(lookup), mcp.WithUnavailableAfter(1))
	waitReady(t, m, "good")
	waitFor(t, m, "unset unavailable", func() bool { return status(m, "unset").State == mcp.StateUnavailable })
	if err := status(m, "unset").Err; err == nil || !strings.Contains(err.Error(), "NOPE") {
		t.Fatalf("err %v, want one naming the unset variable", err)
	}
}

// TestProcessGroupKilled: a stdio server's children die with it when the Manager stops.
func TestProcessGroupKilled(t *testing.T) {
	dir := t.TempDir()
	childPid := filepath.Join(dir, "child")
	m, err := mcp.NewManager([]mcp.ServerConfig{{Name: "ex", Transport: mcp.TransportStdio, Command: "/bin/sh",
		Args: []string{"-c", `sleep 1000 & echo $! > "$1"; exec "$2"`, "sh", childPid, exampleServer}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	waitReady(t, m, "ex")
	b, err := os.ReadFile(childPid)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	poll(t, "the server's child to die", func() bool {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			return true // gone
		}
		// A zombie is dead, waiting for whoever inherited it to reap it.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		return len(fields) > 0 && fields[0] == "Z"
	})
	_ = syscall.Kill(pid, syscall.SIGKILL) // in case the test failed: leave nothing behind
}

// TestConfigErrors: every problem is reported at once, before anything starts.
func TestConfigErrors(t *testing.T) {
	_, err := mcp.NewManager([]mcp.ServerConfig{
		{Name: "a__b", Transport: mcp.TransportStdio, Command: "x"},
		{Name: "noCommand", Transport: mcp.TransportStdio},
		{Name: "noURL", Transport: mcp.TransportHTTP},
		{Name: "odd", Transport: "carrier-pigeon"},
		{Name: "glob", Transport: mcp.TransportStdio, Command: "x", Allow: []string{"["}},
		{Name: "dup", Transport: mcp.TransportStdio, Command: "x"},
		{Name: "dup", Transport: mcp.TransportStdio, Command: "x"},
	})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`"a__b"`, `"noCommand"`, `"noURL"`, `"odd"`, `"glob"`, `"dup": configured twice`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s:\n%v", want, err)
		}
	}
}
