package e2e

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpSpan is what the test keeps of one exported span.
type otlpSpan struct {
	service, name       string
	trace, span, parent string
	kind                string
	attrs               map[string]string // string and int values, as text
	errored             bool              // its status is an error
}

// otlpReceiver is an OTLP/HTTP traces endpoint that decodes the
// exporter's protobuf, as a collector would.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []otlpSpan
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not an OTLP/HTTP protobuf traces export", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var export coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &export); err != nil {
			t.Errorf("an export that does not decode: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range export.ResourceSpans {
			service := ""
			for _, kv := range rs.Resource.GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					attrs := map[string]string{}
					for _, kv := range s.Attributes {
						if v, ok := kv.Value.GetValue().(*commonpb.AnyValue_IntValue); ok {
							attrs[kv.Key] = fmt.Sprint(v.IntValue)
						} else {
							attrs[kv.Key] = kv.Value.GetStringValue()
						}
					}
					r.spans = append(r.spans, otlpSpan{service: service, name: s.Name, kind: s.Kind.String(), attrs: attrs,
						errored: s.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR,
						trace:   hex.EncodeToString(s.TraceId), span: hex.EncodeToString(s.SpanId), parent: hex.EncodeToString(s.ParentSpanId)})
				}
			}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Write(b)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) snapshot() []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]otlpSpan(nil), r.spans...)
}

// TestTraceAcrossThreeAgents: front delegates to middle, which delegates to
// back, which answers with its MCP tool; each agent exports to one OTLP
// receiver. One trace id spans the three agents' spans, and each agent's
// inbound request span is the child of the request span of the agent that
// called it (W3C traceparent carried on every hop). Each agent's /metrics
// counts the same work: the delegations, the gate's decision, the tool call.
func TestTraceAcrossThreeAgents(t *testing.T) {
	otlp := newOTLPReceiver(t)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp.srv.URL, "OTEL_BSP_SCHEDULE_DELAY=100"}
	bin := buildMCPServer(t)
	common := fmt.Sprintf(`auth: {anonymous: true}
log: {level: warn}
limits: {shutdown_grace: 1s}
mcp_servers: [{name: notes, command: %q}]
tool_contracts: [{tool: notes__stats, effect: read, risk: low, approval: none}]
`, bin)
	dir := t.TempDir()
	contract := func(skill string) string {
		path := filepath.Join(dir, skill+".yaml")
		body := fmt.Sprintf("skill: %s\nversion: \"1\"\nartifacts:\n  notes__stats: {type: object, required: [notes]}\ncommit_requires:\n  - {artifact: notes__stats, pointer: /notes}\n", skill)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	addr := map[string]string{"front": freeAddr(t), "middle": freeAddr(t), "back": freeAddr(t)}
	start := func(name, config string) *agent {
		return launchEnv(t, name, writeFile(t, name+".yaml", config), addr[name], t.TempDir(), env)
	}
	back := start("back", "name: back\ndescription: Counts notes.\n"+common+
		"skills: [{id: notes-stats, name: Note stats, executor: mcp, tool: notes__stats}]\n")
	back.waitReady()
	middle := start("middle", "name: middle\ndescription: Delegates the count.\n"+common+fmt.Sprintf(
		"peers: [{name: back, url: %q, trust: {jku_prefixes: [%q]}}]\nskills: [{id: count, name: Count, executor: delegate, delegate: {skill: notes-stats, contract: %q}}]\n",
		back.base, back.base+"/.well-known/", contract("count")))
	middle.waitReady()
	front := start("front", "name: front\ndescription: Delegates the count again.\n"+common+fmt.Sprintf(
		"peers: [{name: middle, url: %q, trust: {jku_prefixes: [%q]}}]\nskills: [{id: count-all, name: Count all, executor: delegate, delegate: {skill: count, contract: %q}}]\n",
		middle.base, middle.base+"/.well-known/", contract("count-all")))
	front.waitReady()

	task := sendTask(t, jsonrpcClient(t, front), &a2a.SendMessageRequest{Message: skillMessage("count-all", "count")})
	t.Logf("front's task %s: %s %s", task.ID, task.Status.State, statusText(task.Status))

	// The front's inbound SendMessage is the root: its trace is the one to follow.
	var trace string
	var spans []otlpSpan
	deadline := time.Now().Add(20 * time.Second)
	for {
		spans = otlp.snapshot()
		for _, s := range spans {
			if s.service == "front" && s.kind == "SPAN_KIND_SERVER" && s.parent == "" && strings.Contains(s.name, "/a2a/jsonrpc") {
				trace = s.trace
			}
		}
		services := map[string]bool{}
		for _, s := range spans {
			if trace != "" && s.trace == trace {
				services[s.service] = true
			}
		}
		if len(services) == 3 && hasChild(spans, trace, "middle", "front") && hasChild(spans, trace, "back", "middle") {
			break
		}
		if time.Now().After(deadline) {
			var lines []string
			for _, s := range spans {
				lines = append(lines, fmt.Sprintf("%s %s %s trace=%s span=%s parent=%s", s.service, s.kind, s.name, s.trace, s.span, s.parent))
			}
			t.Fatalf("no trace %q spanning front, middle and back with their parent links within 20s; spans:\n%s", trace, strings.Join(lines, "\n"))
		}
		time.Sleep(100 * time.Millisecond) // polling, with a deadline
	}
	names := map[string]bool{}
	for _, s := range spans {
		if s.trace == trace {
			names[s.service+" "+s.name] = true
		}
	}
	for _, want := range []string{"front handoff.task.execute", "middle handoff.task.execute", "back handoff.task.execute", "back mcp.call notes__stats", "front handoff.store.append"} {
		if !names[want] {
			t.Errorf("no span %q in the trace; spans: %v", want, names)
		}
	}

	// Each delegating agent's gate decision and its delegation are spans of
	// their own under the task's execution, with the skill, the peer and the
	// outcome; a commit is no error.
	byID := map[string]otlpSpan{}
	for _, s := range spans {
		byID[s.span] = s
	}
	for _, c := range []struct{ service, skill, peer string }{{"front", "count-all", "middle"}, {"middle", "count", "back"}} {
		for _, name := range []string{"handoff.gate.decide", "handoff.delegation"} {
			var found *otlpSpan
			for _, s := range spans {
				if s.trace == trace && s.service == c.service && s.name == name {
					found = &s
				}
			}
			if found == nil {
				t.Errorf("%s: no %s span in the trace", c.service, name)
				continue
			}
			if p := byID[found.parent]; p.name != "handoff.task.execute" || p.service != c.service {
				t.Errorf("%s: %s's parent is %q of %s, want %s's handoff.task.execute", c.service, name, p.name, p.service, c.service)
			}
			if found.attrs["handoff.skill"] != c.skill || found.attrs["handoff.peer"] != c.peer || found.attrs["handoff.gate.outcome"] != "committed" || found.errored {
				t.Errorf("%s: %s attributes %v (error %v), want skill %s, peer %s, committed, no error", c.service, name, found.attrs, found.errored, c.skill, c.peer)
			}
			if name == "handoff.gate.decide" && (found.attrs["handoff.gate.checks"] == "" || found.attrs["handoff.gate.checks"] == "0") {
				t.Errorf("%s: gate span counts %q checks, want some", c.service, found.attrs["handoff.gate.checks"])
			}
		}
	}

	// The same work in each agent's metrics.
	for _, c := range []struct {
		a      *agent
		sample string
	}{
		{front, `handoff_delegations_total{peer="middle",skill="count-all"} 1`},
		{front, `handoff_gate_decisions_total{decision="committed",peer="middle",skill="count-all"} 1`},
		{middle, `handoff_delegations_total{peer="back",skill="count"} 1`},
		{back, `handoff_tool_calls_total{decision="allow",outcome="success",tool="notes__stats"} 1`},
		{back, `handoff_mcp_server_up{server="notes"} 1`},
	} {
		status, body, err := httpGet(t.Context(), c.a.base+"/metrics")
		if err != nil || status != http.StatusOK {
			t.Fatalf("GET %s/metrics: %d %v", c.a.base, status, err)
		}
		if !strings.Contains(body, c.sample+"\n") {
			t.Errorf("%s/metrics has no line %q", c.a.base, c.sample)
		}
	}
}

// hasChild reports whether, in trace, an inbound (server) span of callee
// has for parent a span of caller: the caller's outbound request.
func hasChild(spans []otlpSpan, trace, callee, caller string) bool {
	of := map[string]string{} // span id → service
	for _, s := range spans {
		if s.trace == trace {
			of[s.span] = s.service
		}
	}
	for _, s := range spans {
		if s.trace == trace && s.service == callee && s.kind == "SPAN_KIND_SERVER" && of[s.parent] == caller {
			return true
		}
	}
	return false
}
