package mcp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/mcp"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type gadgetIn struct{}

func addGadget(srv *mcpsdk.Server, name string, i int) {
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: name, Description: fmt.Sprintf("Gadget number %d of the workshop: reports its serial.", i)},
		func(context.Context, *mcpsdk.CallToolRequest, gadgetIn) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{}, nil, nil
		})
}

// gadgetServer serves n tools over real HTTP (go-sdk's streamable handler).
func gadgetServer(b *testing.B, n int) (*mcpsdk.Server, string) {
	b.Helper()
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "gadgets", Version: "1"}, nil)
	for i := range n {
		addGadget(srv, fmt.Sprintf("gadget_%05d", i), i)
	}
	hs := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil))
	b.Cleanup(hs.Close)
	return srv, hs.URL
}

var catalogSizes = []int{10, 5000}

// BenchmarkCatalogListing is the MCP protocol's share of a publication: a bare go-sdk client
// reading every page of the server's tools over HTTP, which a relist cannot avoid today.
func BenchmarkCatalogListing(b *testing.B) {
	for _, n := range catalogSizes {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			_, url := gadgetServer(b, n)
			client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "bare", Version: "1"}, nil)
			sess, err := client.Connect(b.Context(), &mcpsdk.StreamableClientTransport{Endpoint: url}, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = sess.Close() })
			for b.Loop() {
				got := 0
				for _, err := range sess.Tools(b.Context(), nil) {
					if err != nil {
						b.Fatal(err)
					}
					got++
				}
				if got != n {
					b.Fatalf("listed %d tools, want %d", got, n)
				}
			}
		})
	}
}

// BenchmarkCatalogProcessing is Handoff's share of a publication: the tools of a listing
// with one tool added made into a snapshot, reusing the unchanged tools of the previous one.
func BenchmarkCatalogProcessing(b *testing.B) {
	for _, n := range catalogSizes {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			defs := make([]*mcpsdk.Tool, n+1)
			for i := range defs {
				defs[i] = &mcpsdk.Tool{Name: fmt.Sprintf("gadget_%05d", i), Description: fmt.Sprintf("Gadget number %d of the workshop: reports its serial.", i),
					InputSchema: map[string]any{"type": "object", "additionalProperties": false}}
			}
			prev, err := mcp.PublishForTest("gadgets", defs[:n], nil)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				// A fresh copy of each definition, as a listing decodes them anew.
				listed := make([]*mcpsdk.Tool, len(defs))
				for i, d := range defs {
					c := *d
					listed[i] = &c
				}
				s, err := mcp.PublishForTest("gadgets", listed, prev)
				if err != nil || len(s.Tools) != n+1 {
					b.Fatalf("publish: %v, %d tools", err, len(s.Tools))
				}
			}
		})
	}
}

// BenchmarkCatalogPublication is the whole of it: the server adds a tool, and the Manager
// publishes the snapshot holding it (the SDK's 10 ms list_changed delay included).
func BenchmarkCatalogPublication(b *testing.B) {
	for _, n := range catalogSizes {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			srv, url := gadgetServer(b, n)
			m, err := mcp.NewManager([]mcp.ServerConfig{{Name: "gadgets", Transport: mcp.TransportHTTP, URL: url}})
			if err != nil {
				b.Fatal(err)
			}
			ctx, stop := context.WithCancel(b.Context())
			done := make(chan error, 1)
			go func() { done <- m.Run(ctx) }()
			b.Cleanup(func() { stop(); <-done })
			wait := func(want int) {
				deadline := time.After(60 * time.Second)
				for {
					updated := m.Updated()
					if s := m.Snapshot(); s != nil && len(s.Tools) == want {
						return
					}
					select {
					case <-updated:
					case <-deadline:
						b.Fatalf("never %d tools: %+v", want, m.Servers())
					}
				}
			}
			wait(n)
			k := 0
			for b.Loop() {
				addGadget(srv, fmt.Sprintf("extra_%d", k), n+k)
				k++
				wait(n + k)
			}
		})
	}
}
