package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// run parses the flags and serves until ctx is done or the client goes away.
func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcpserver", flag.ContinueOnError)
	addr := fs.String("http", "", "serve streamable HTTP on `ADDR` (path /mcp) instead of stdio")
	pageSize := fs.Int("page-size", 3, "tools per tools/list page, small so that clients must paginate")
	events := fs.String("events", "", "append one line per tool call start to `FILE`, so tests can see a call in flight")
	pidFile := fs.String("pid-file", "", "write the process id to `FILE`")
	gadgets := fs.Int("gadgets", 0, "add `N` read tools gadget_000… (a big catalog, for tool search)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pidFile != "" {
		if err := os.WriteFile(*pidFile, fmt.Appendf(nil, "%d\n", os.Getpid()), 0o644); err != nil {
			return err
		}
	}
	n := &notes{notes: map[string]string{"welcome": "Hello from the example MCP server."}, events: *events, written: map[string]string{}}
	srv := n.server(*pageSize)
	addGadgets(srv, *gadgets)
	if *addr == "" {
		return srv.Run(ctx, &mcpsdk.StdioTransport{})
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	return serveHTTP(ctx, ln, srv)
}

// serveHTTP serves one MCP server (every session shares its notes and tool list) on ln at /mcp.
func serveHTTP(ctx context.Context, ln net.Listener, srv *mcpsdk.Server) error {
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "mcpserver: serving http://%s/mcp\n", ln.Addr())
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shut); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// notes is the server's state: named text notes, shared by every session.
type notes struct {
	mu     sync.Mutex
	notes  map[string]string
	extra  bool // toggle_tool has added the extra tool
	events string
	// written remembers the answer write_note gave for each idempotency key, so that a
	// repeated key gets the same answer without writing again. A real server would expire
	// entries; this one lives as long as a test or a demo.
	written map[string]string
}

// idempotencyMetaKey is where Handoff puts a call's idempotency key in _meta.
const idempotencyMetaKey = "io.github.handoff-a2a/idempotency-key"

// idempotencyKey is the key a call carries, or "".
func idempotencyKey(req *mcpsdk.CallToolRequest) string {
	if req == nil || req.Params == nil {
		return ""
	}
	k, _ := req.Params.Meta[idempotencyMetaKey].(string)
	return k
}

// started records a tool call start in the events file, if there is one, with the call's
// idempotency key when it has one.
func (n *notes) started(tool string, req *mcpsdk.CallToolRequest) {
	if n.events == "" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	f, err := os.OpenFile(n.events, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	line := fmt.Sprintf("start %s %d", tool, os.Getpid())
	if k := idempotencyKey(req); k != "" {
		line += " key=" + k
	}
	fmt.Fprintln(f, line)
}

func text(s string) *mcpsdk.CallToolResult {
	return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: s}}}
}

type noteName struct {
	Name string `json:"name" jsonschema:"the note's name"`
}

type noteText struct {
	Name string `json:"name" jsonschema:"the note's name"`
	Text string `json:"text" jsonschema:"the note's new text"`
}

type slowArgs struct {
	MS        int    `json:"ms" jsonschema:"milliseconds to sleep"`
	UntilFile string `json:"until_file,omitempty" jsonschema:"stop sleeping early once this file exists"`
}

type statsArgs struct {
	Break bool `json:"break,omitempty" jsonschema:"answer with output that breaks the output schema"`
}

type empty struct{}

// server builds the MCP server and its tools.
func (n *notes) server(pageSize int) *mcpsdk.Server {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "handoff-example", Version: "1.0.0"},
		&mcpsdk.ServerOptions{PageSize: pageSize})

	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "read_note", Description: "Read a note."},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, a noteName) (*mcpsdk.CallToolResult, any, error) {
			n.started("read_note", req)
			n.mu.Lock()
			defer n.mu.Unlock()
			t, ok := n.notes[a.Name]
			if !ok {
				return &mcpsdk.CallToolResult{IsError: true, Content: text("no note " + a.Name).Content}, nil, nil
			}
			return text(t), nil, nil
		})

	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "write_note", Description: "Create or replace a note. Changes state: needs approval. " +
		"A call whose _meta carries " + idempotencyMetaKey + " runs once per key: a repeat gets the first answer and writes nothing."},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, a noteText) (*mcpsdk.CallToolResult, any, error) {
			n.started("write_note", req)
			key := idempotencyKey(req)
			n.mu.Lock()
			defer n.mu.Unlock()
			if answer, done := n.written[key]; done && key != "" {
				return text(answer), nil, nil
			}
			n.notes[a.Name] = a.Text
			answer := "saved " + a.Name
			if key != "" {
				n.written[key] = answer
			}
			return text(answer), nil, nil
		})

	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "slow", Description: "Sleep for ms milliseconds, or until until_file exists; stops when cancelled."},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, a slowArgs) (*mcpsdk.CallToolResult, any, error) {
			n.started("slow", req)
			deadline := time.NewTimer(time.Duration(a.MS) * time.Millisecond)
			defer deadline.Stop()
			tick := time.NewTicker(10 * time.Millisecond) // a file has no change notification that works everywhere
			defer tick.Stop()
			for {
				if a.UntilFile != "" {
					if _, err := os.Stat(a.UntilFile); err == nil {
						return text("file appeared"), nil, nil
					}
				}
				select {
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				case <-deadline.C:
					return text(fmt.Sprintf("slept %dms", a.MS)), nil, nil
				case <-tick.C:
				}
			}
		})

	// stats is added raw: the typed AddTool would validate its own output, and the point of
	// "break" is a server that sends output breaking its declared schema.
	statsOut := &jsonschema.Schema{
		Type:     "object",
		Required: []string{"notes", "bytes"},
		Properties: map[string]*jsonschema.Schema{
			"notes": {Type: "integer", Description: "how many notes there are"},
			"bytes": {Type: "integer", Description: "their total length"},
		},
	}
	statsIn, err := jsonschema.For[statsArgs](nil)
	if err != nil {
		panic(err) // a static type: cannot fail at run time
	}
	srv.AddTool(&mcpsdk.Tool{Name: "stats", Description: "Count the notes, as structured content.", InputSchema: statsIn, OutputSchema: statsOut},
		func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			n.started("stats", req)
			var a statsArgs
			if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
				return nil, err
			}
			n.mu.Lock()
			out := map[string]any{"notes": len(n.notes), "bytes": 0}
			total := 0
			for _, t := range n.notes {
				total += len(t)
			}
			out["bytes"] = total
			n.mu.Unlock()
			if a.Break {
				out = map[string]any{"notes": "many"}
			}
			raw, _ := json.Marshal(out)
			return &mcpsdk.CallToolResult{StructuredContent: out, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: string(raw)}}}, nil
		})

	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "fail", Description: "Always fails, as a tool (isError), not as a protocol error."},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ empty) (*mcpsdk.CallToolResult, any, error) {
			n.started("fail", req)
			return &mcpsdk.CallToolResult{IsError: true, Content: text("the fail tool failed, as asked").Content}, nil, nil
		})

	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "toggle_tool", Description: "Add the extra tool, or remove it if present; clients get tools/list_changed."},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ empty) (*mcpsdk.CallToolResult, any, error) {
			n.started("toggle_tool", req)
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.extra {
				srv.RemoveTools("extra")
			} else {
				n.addExtra(srv)
			}
			n.extra = !n.extra
			return text(fmt.Sprintf("extra tool present: %v", n.extra)), nil, nil
		})

	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "list_notes", Description: "List the notes' names."},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ empty) (*mcpsdk.CallToolResult, any, error) {
			n.started("list_notes", req)
			n.mu.Lock()
			defer n.mu.Unlock()
			var names []string
			for k := range n.notes {
				names = append(names, k)
			}
			slices.Sort(names)
			return text(strings.Join(names, "\n")), nil, nil
		})
	return srv
}

// addExtra adds the tool that toggle_tool switches on and off.
func (n *notes) addExtra(srv *mcpsdk.Server) {
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "extra", Description: "Exists only while toggled on."},
		func(ctx context.Context, _ *mcpsdk.CallToolRequest, _ empty) (*mcpsdk.CallToolResult, any, error) {
			return text("extra"), nil, nil
		})
}

type gadgetArgs struct {
	Verbose bool `json:"verbose,omitempty" jsonschema:"say more"`
}

// addGadgets adds count read tools gadget_NNN, each answering its own number: a catalog too
// big to show a model every schema of.
func addGadgets(srv *mcpsdk.Server, count int) {
	for i := range count {
		name := fmt.Sprintf("gadget_%03d", i)
		mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: name, Description: fmt.Sprintf("Gadget number %d of the workshop: reports its serial.", i)},
			func(ctx context.Context, req *mcpsdk.CallToolRequest, _ gadgetArgs) (*mcpsdk.CallToolResult, any, error) {
				return text(fmt.Sprintf("%s: serial %d", name, 1000+i)), nil, nil
			})
	}
}
