package mcp_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/handoff-a2a/handoff/mcp"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServerEverything runs the pipeline against the reference TypeScript server,
// @modelcontextprotocol/server-everything, started with node from testdata/npm.
func TestServerEverything(t *testing.T) {
	if nodeErr != nil {
		t.Fatal(nodeErr)
	}
	env := map[string]string{"PATH": os.Getenv("PATH"), "HANDOFF_SECRET": "s3cret", "HOME": "/home/agent"}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	m := start(t, []mcp.ServerConfig{{Name: "every", Transport: mcp.TransportStdio, Command: "node", Args: []string{everything, "stdio"},
		Env: map[string]string{"GREETING": "token=${HANDOFF_SECRET};"}}}, mcp.WithLookupEnv(lookup))
	waitReady(t, m, "every")
	if p := status(m, "every").Protocol; p != "2025-11-25" {
		t.Errorf("protocol %q, want the pinned 2025-11-25", p)
	}

	t.Run("list", func(t *testing.T) {
		for _, name := range []string{"every__echo", "every__get-structured-content", "every__get-sum"} {
			if _, ok := m.Snapshot().Tool(name); !ok {
				t.Errorf("%s missing from %v", name, toolNames(m.Snapshot()))
			}
		}
	})
	t.Run("list_changed", func(t *testing.T) {
		// The server registers more tools once initialised and says so with list_changed;
		// the supervisor lists again on it.
		waitFor(t, m, "a second listing", func() bool { return status(m, "every").Listings >= 2 })
	})
	t.Run("call", func(t *testing.T) {
		r := call(t, m, mcp.CallRequest{Tool: "every__echo", Arguments: map[string]any{"message": "hi"}, ReadOnly: true})
		want(t, r, mcp.OutcomeSuccess)
		if got := string(mustJSON(t, r.Content)); !strings.Contains(got, "hi") {
			t.Fatalf("content %s", got)
		}
	})
	t.Run("structured output validated", func(t *testing.T) {
		r := call(t, m, mcp.CallRequest{Tool: "every__get-structured-content", Arguments: map[string]any{"location": "Chicago"}, ReadOnly: true})
		want(t, r, mcp.OutcomeSuccess)
		if got := string(mustJSON(t, r.StructuredContent)); !strings.Contains(got, "temperature") {
			t.Fatalf("structured content %s", got)
		}
	})
	t.Run("output breaking an override schema", func(t *testing.T) {
		r := call(t, m, mcp.CallRequest{Tool: "every__get-structured-content", Arguments: map[string]any{"location": "Chicago"},
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"temperature":{"type":"string"}}}`)})
		want(t, r, mcp.OutcomeValidationFailed)
		if r.StructuredContent != nil {
			t.Fatal("broken output passed on")
		}
	})
	t.Run("arguments validated", func(t *testing.T) {
		want(t, call(t, m, mcp.CallRequest{Tool: "every__get-structured-content", Arguments: map[string]any{"location": "Paris"}}), mcp.OutcomeValidationFailed)
	})
	t.Run("isError is a tool error", func(t *testing.T) {
		// Only http, https and data URLs are accepted: the tool throws, the SDK answers isError.
		r := call(t, m, mcp.CallRequest{Tool: "every__gzip-file-as-resource", Arguments: map[string]any{"name": "x.gz", "data": "ftp://example.com/x"}})
		want(t, r, mcp.OutcomeToolError)
	})
	t.Run("environment", func(t *testing.T) {
		r := call(t, m, mcp.CallRequest{Tool: "every__get-env", ReadOnly: true})
		want(t, r, mcp.OutcomeSuccess)
		var got map[string]string
		if err := json.Unmarshal([]byte(r.Content[0].(*mcpsdk.TextContent).Text), &got); err != nil {
			t.Fatal(err)
		}
		if got["GREETING"] != "token=s3cret;" || got["PATH"] == "" {
			t.Errorf("GREETING %q, PATH %q", got["GREETING"], got["PATH"])
		}
		if _, leaked := got["HOME"]; leaked {
			t.Error("HOME leaked into the server's environment")
		}
	})
	t.Run("stale call", func(t *testing.T) {
		want(t, call(t, m, mcp.CallRequest{Tool: "every__echo", SnapshotVersion: "stale", Arguments: map[string]any{"message": "hi"}}), mcp.OutcomeUnavailableTool)
		want(t, call(t, m, mcp.CallRequest{Tool: "every__no-such-tool"}), mcp.OutcomeUnavailableTool)
	})
}
