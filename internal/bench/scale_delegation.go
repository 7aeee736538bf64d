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
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/handoff-a2a/handoff"
)

// delegationContractPath is the example's contract the delegation curve's
// front agent holds its peer to: the stats artifact, checked by a verifier
// calling the front's own MCP tool.
const delegationContractPath = "examples/delegation/contract.yaml"

// builtinDelegationContract is that contract, for a run outside the
// repository's root.
const builtinDelegationContract = `skill: count-notes
version: "1"
artifacts:
  notes__stats:
    type: object
    required: [notes, bytes]
    properties:
      notes: {type: integer, minimum: 0}
      bytes: {type: integer, minimum: 0}
commit_requires:
  - {artifact: notes__stats, pointer: /notes}
verifiers:
  - name: same-count
    tool: notes__stats
    arguments: {}
    condition: result.notes == evidence.notes__stats.notes
`

// delegationContract returns the path of the example's contract, or of a
// copy of it written in dir when the example is not found.
func delegationContract(dir string) (string, error) {
	if _, err := os.Stat(delegationContractPath); err == nil {
		return filepath.Abs(delegationContractPath)
	}
	path := filepath.Join(dir, "contract.yaml")
	if err := os.WriteFile(path, []byte(builtinDelegationContract), 0o600); err != nil {
		return "", fmt.Errorf("write the delegation contract: %w", err)
	}
	return path, nil
}

// notesServer is an MCP server over real HTTP with the example's notes
// stats tool, that times the tools/call requests it serves.
type notesServer struct {
	url  string
	stop func() error

	mu    sync.Mutex
	calls []time.Duration
}

func startNotesServer() (*notesServer, error) {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "bench-notes", Version: "1"}, nil)
	out := &jsonschema.Schema{Type: "object", Required: []string{"notes", "bytes"}, Properties: map[string]*jsonschema.Schema{
		"notes": {Type: "integer"}, "bytes": {Type: "integer"},
	}}
	srv.AddTool(&mcpsdk.Tool{Name: "stats", Description: "Count the notes, as structured content.", InputSchema: &jsonschema.Schema{Type: "object"}, OutputSchema: out},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			res := map[string]any{"notes": 1, "bytes": 33}
			return &mcpsdk.CallToolResult{StructuredContent: res, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: `{"notes":1,"bytes":33}`}}}, nil
		})
	n := &notesServer{}
	mcpHandler := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	base, stop, err := startHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Only tool calls are timed: the session's set-up and tool lists
		// are not part of a verifier's call.
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		t0 := time.Now()
		mcpHandler.ServeHTTP(w, r)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			n.mu.Lock()
			n.calls = append(n.calls, time.Since(t0))
			n.mu.Unlock()
		}
	}))
	if err != nil {
		return nil, fmt.Errorf("serve the notes MCP server: %w", err)
	}
	n.url, n.stop = base, stop
	return n, nil
}

// takeCalls returns the tool calls timed since the last take, sorted.
func (n *notesServer) takeCalls() []time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.calls
	n.calls = nil
	slices.Sort(c)
	return c
}

// startAgent serves an agent of cfg on an ephemeral port until stop.
func startAgent(ctx context.Context, cfg *handoff.Config, log *slog.Logger, opts ...handoff.Option) (base string, stop func() error, err error) {
	agent, err := handoff.New(ctx, cfg, append([]handoff.Option{handoff.WithLogger(log)}, opts...)...)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		agent.Close()
		return "", nil, err
	}
	serveCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- agent.Serve(serveCtx, ln) }()
	return "http://" + ln.Addr().String(), func() error {
		cancel()
		return <-served
	}, nil
}

// delegationPair is a front agent delegating one skill to a peer, both
// in this process over real HTTP.
type delegationPair struct {
	front, peer string // base URLs
	stops       []func() error
}

func (p *delegationPair) close() error {
	var errs []error
	for _, stop := range slices.Backward(p.stops) {
		errs = append(errs, stop())
	}
	return errors.Join(errs...)
}

// startPair serves the peer of peerYAML, then a front agent of frontYAML
// (its %s the peer's base URL, then the peer's /.well-known/ prefix its
// card is trusted by), each with a data directory under dir.
func startPair(ctx context.Context, dir, peerYAML, frontYAML string, log *slog.Logger, peerOpts ...handoff.Option) (_ *delegationPair, err error) {
	p := &delegationPair{}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.close())
		}
	}()
	for _, role := range []string{"peer", "front"} {
		yaml := peerYAML
		var opts []handoff.Option
		if role == "front" {
			yaml = fmt.Sprintf(frontYAML, p.peer, p.peer+"/.well-known/")
		} else {
			opts = peerOpts
		}
		cfg, err := handoff.ParseConfig("bench "+role, strings.NewReader(yaml))
		if err != nil {
			return nil, fmt.Errorf("the %s agent's config: %w", role, err)
		}
		cfg.DataDir = filepath.Join(dir, role)
		base, stop, err := startAgent(ctx, cfg, log, opts...)
		if err != nil {
			return nil, fmt.Errorf("start the %s agent: %w", role, err)
		}
		p.stops = append(p.stops, stop)
		if role == "peer" {
			p.peer = base
		} else {
			p.front = base
		}
	}
	return p, nil
}

// skillCaller makes callers sending a blocking message with text to skill
// at the JSON-RPC endpoint of base, each answer checked to be a completed
// task.
func (g *generator) skillCaller(base, skill, text string) func() caller {
	url := base + jsonrpcPath
	return func() caller {
		header := http.Header{}
		header.Set("Content-Type", "application/json")
		header.Set("A2A-Version", "1.0")
		answer := new(bytes.Buffer)
		var body []byte
		return func(ctx context.Context) ([]byte, error) {
			body = append(body[:0], `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"bench-`...)
			body = strconv.AppendUint(body, g.seq.Add(1), 10)
			body = append(body, `","role":"ROLE_USER","metadata":{"handoff/skill":`...)
			body = strconv.AppendQuote(body, skill)
			body = append(body, `},"parts":[{"text":`...)
			body = strconv.AppendQuote(body, text)
			body = append(body, `}]}}}`...)
			if err := g.post(ctx, url, header, body, answer); err != nil {
				return nil, err
			}
			return answer.Bytes(), checkAnswer(answer.Bytes())
		}
	}
}

// warmUp calls until one call succeeds, for at most a while: a new front
// agent verifies its peer's card and connects its MCP servers first.
func warmUp(ctx context.Context, call caller) error {
	end := time.Now().Add(30 * time.Second)
	for {
		_, err := call(ctx)
		if err == nil || time.Now().After(end) || ctx.Err() != nil {
			if ctx.Err() != nil {
				return errPointTimeout
			}
			return err
		}
		select {
		case <-ctx.Done():
			return errPointTimeout
		case <-time.After(100 * time.Millisecond):
		}
	}
}

const delegationCommon = `auth: {anonymous: true}
log: {level: warn}
limits: {shutdown_grace: 2s}
mcp_servers: [{name: notes, transport: http, url: %q}]
tool_contracts: [{tool: notes__stats, effect: read, risk: low, approval: none}]
`

// runDelegation serves a peer whose skill answers with its MCP tool and a
// front agent whose delegate skill holds it to the example's contract, its
// verifier calling the front's own MCP server, and measures at each
// concurrency blocking sends to the front's skill against the same sends
// straight to the peer, in turns.
func runDelegation(ctx context.Context, opts ScaleOptions, dir string, cr *CurveReport) (err error) {
	dir = filepath.Join(dir, "delegation")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("make the delegation directory: %w", err)
	}
	contract, err := delegationContract(dir)
	if err != nil {
		return err
	}
	var servers []*notesServer
	defer func() {
		for _, s := range servers {
			err = errors.Join(err, s.stop())
		}
	}()
	for range 2 {
		s, err := startNotesServer()
		if err != nil {
			return err
		}
		servers = append(servers, s)
	}
	peerMCP, frontMCP := servers[0], servers[1]
	peerYAML := "name: Bench peer\ndescription: Counts notes with its MCP tool.\n" + fmt.Sprintf(delegationCommon, peerMCP.url) +
		"skills: [{id: notes-stats, name: Note stats, executor: mcp, tool: notes__stats}]\n"
	frontYAML := "name: Bench front\ndescription: Delegates note counts and commits verified answers.\n" + fmt.Sprintf(delegationCommon, frontMCP.url) +
		"peers: [{name: peer, url: %q, trust: {jku_prefixes: [%q]}}]\n" +
		fmt.Sprintf("skills: [{id: count-notes, name: Count notes, description: The peer counts the notes., executor: delegate, delegate: {skill: notes-stats, contract: %q}}]\n", contract)
	log := slog.New(slog.NewTextHandler(opts.Progress, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pair, err := startPair(ctx, dir, peerYAML, frontYAML, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, pair.close()) }()
	maxC := slices.Max(opts.Sizes[CurveDelegation])
	g := newGenerator(maxC)
	defer g.close()
	direct := g.skillCaller(pair.peer, "notes-stats", "count")
	delegated := g.skillCaller(pair.front, "count-notes", "count")
	for _, c := range opts.Sizes[CurveDelegation] {
		started := time.Now()
		pctx, cancel := context.WithTimeout(ctx, opts.PointTimeout)
		p := Point{Size: c}
		err := delegationPoint(pctx, opts, g, c, direct, delegated, frontMCP, &p)
		ended := endPoint(ctx, pctx, opts, cr, p, started, err)
		cancel()
		if ended {
			return nil
		}
	}
	return nil
}

// delegationRounds is how many turns of each kind of send a point takes,
// so that a stretch of noise on the shared machine falls on both.
const delegationRounds = 2

func delegationPoint(ctx context.Context, opts ScaleOptions, g *generator, c int, direct, delegated func() caller, verifier *notesServer, p *Point) error {
	for _, mk := range []func() caller{direct, delegated} {
		if err := warmUp(ctx, mk()); err != nil {
			return fmt.Errorf("warm up: %w", err)
		}
	}
	warm := min(opts.Measure/4, 250*time.Millisecond)
	drive(ctx, c, warm, direct)
	drive(ctx, c, warm, delegated)
	verifier.takeCalls()
	var d, del load
	for range delegationRounds {
		d.add(drive(ctx, c, opts.Measure/delegationRounds, direct))
		del.add(drive(ctx, c, opts.Measure/delegationRounds, delegated))
	}
	if ctx.Err() != nil {
		return errPointTimeout
	}
	for _, l := range []struct {
		name string
		load
	}{{"direct", d}, {"delegated", del}} {
		if l.errors > 0 {
			return fmt.Errorf("%s sends: %d errors, the first: %v", l.name, l.errors, l.firstError)
		}
	}
	calls := verifier.takeCalls()
	slices.Sort(d.latencies)
	slices.Sort(del.latencies)
	ms := func(x time.Duration) float64 { return float64(x) / float64(time.Millisecond) }
	p.set("direct_p50_ms", ms(percentile(d.latencies, 50)))
	p.set("direct_p99_ms", ms(percentile(d.latencies, 99)))
	p.set("delegated_p50_ms", ms(percentile(del.latencies, 50)))
	p.set("delegated_p99_ms", ms(percentile(del.latencies, 99)))
	p.set("added_p50_ms", ms(percentile(del.latencies, 50)-percentile(d.latencies, 50)))
	p.set("added_p99_ms", ms(percentile(del.latencies, 99)-percentile(d.latencies, 99)))
	p.set("verifier_p50_ms", ms(percentile(calls, 50)))
	p.set("verifier_p99_ms", ms(percentile(calls, 99)))
	p.set("verifier_calls_per_send", float64(len(calls))/float64(del.ok))
	p.set("direct_per_s", float64(d.ok)/d.elapsed.Seconds())
	p.set("delegated_per_s", float64(del.ok)/del.elapsed.Seconds())
	return nil
}
