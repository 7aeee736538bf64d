package handoff

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/handoff-a2a/handoff/internal/auth"
)

// scrape GETs url and parses it with Prometheus's own text parser.
func scrape(t *testing.T, url, header, value string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if header != "" {
		req.Header.Set(header, value)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the metrics do not parse as the Prometheus text format: %v", err)
	}
	return fams
}

// value is the counter, gauge or histogram count of the sample of family
// name whose labels include want (name=value pairs); 0 when there is none.
func value(fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	f, ok := fams[name]
	if !ok {
		return 0
	}
	sum := 0.0
next:
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(want); i += 2 {
			if labels[want[i]] != want[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

// TestMetricsCountAKnownWorkload: after N sends, one GetTask of an unknown
// task and one webhook that refuses every delivery, /metrics counts exactly
// those, in the Prometheus text format.
func TestMetricsCountAKnownWorkload(t *testing.T) {
	url := startAgent(t, pushConfig(t, ", max_attempts: 1"))
	var refused atomic.Int64
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refused.Add(1)
		http.Error(w, "no", http.StatusBadRequest)
	}))
	t.Cleanup(dead.Close)
	const n = 5
	for i := range n {
		if status, out := call(t, url, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":"tck-complete-task-%d","role":"ROLE_USER","parts":[{"text":"hi"}]}}`, i)); status != http.StatusOK || out["result"] == nil {
			t.Fatalf("send %d: %d %v", i, status, out)
		}
	}
	if status, out := call(t, url, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":"tck-complete-task-p","role":"ROLE_USER","parts":[{"text":"hi"}]},
		"configuration":{"taskPushNotificationConfig":{"url":%q}}}`, dead.URL+"/hook")); status != http.StatusOK || out["result"] == nil {
		t.Fatalf("send with a webhook: %d %v", status, out)
	}
	if status, out := call(t, url, "", "", "GetTask", `{"id":"no-such-task"}`); status != http.StatusOK || out["error"] == nil {
		t.Fatalf("GetTask of an unknown task: %d %v", status, out)
	}
	// Every delivery is refused and, at max_attempts 1, dead-lettered at once.
	var deadLetters int
	for deadline := time.Now().Add(10 * time.Second); ; {
		deadLetters = 0
		for _, st := range pushStatuses(t, url) {
			deadLetters += len(st.Dead)
		}
		if deadLetters > 0 && int64(deadLetters) == refused.Load() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dead letters, %d refusals", deadLetters, refused.Load())
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}

	fams := scrape(t, url+"/metrics", "", "")
	for _, c := range []struct {
		what   string
		got    float64
		want   float64
		atLeat bool
	}{
		{"SendMessage ok on jsonrpc", value(fams, "handoff_a2a_requests_total", "method", "SendMessage", "binding", "jsonrpc", "outcome", "ok"), n + 1, false},
		{"GetTask task_not_found", value(fams, "handoff_a2a_requests_total", "method", "GetTask", "outcome", "task_not_found"), 1, false},
		{"request latencies of SendMessage", value(fams, "handoff_a2a_request_duration_seconds", "method", "SendMessage"), n + 1, false},
		{"tasks completed", value(fams, "handoff_task_transitions_total", "state", "completed"), n + 1, false},
		{"appends", value(fams, "handoff_store_append_duration_seconds"), n + 1, true},
		{"dead letters", value(fams, "handoff_push_attempts_total", "outcome", "dead"), float64(deadLetters), false},
		{"deliveries", value(fams, "handoff_push_attempts_total", "outcome", "delivered"), 0, false},
	} {
		if c.got != c.want && !(c.atLeat && c.got > c.want) {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if _, ok := fams["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}
	// No task id is ever a label.
	for name, f := range fams {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if strings.Contains(l.GetValue(), "tck-complete-task") || strings.Count(l.GetValue(), "-") >= 4 {
					t.Errorf("%s has label %s=%q: an id, not a low-cardinality value", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// TestMetricsAuthenticatedOrOwnAddress: /metrics of the agent's listener
// is behind its authentication; metrics.listen serves them on an address
// of their own without it, and not on the agent's.
func TestMetricsAuthenticatedOrOwnAddress(t *testing.T) {
	c := testConfig(t)
	c.Auth = AuthConfig{APIKeys: []APIKeyConfig{{Name: "ops", SHA256: auth.HashAPIKey("secret-key-123")}}}
	url := startAgent(t, c)
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics without credentials: %s, want 401", resp.Status)
	}
	if fams := scrape(t, url+"/metrics", "X-API-Key", "secret-key-123"); fams["handoff_a2a_requests_total"] == nil && fams["go_goroutines"] == nil {
		t.Fatal("no metrics with credentials")
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c2 := testConfig(t)
	c2.Metrics.Listen = addr
	url2 := startAgent(t, c2)
	var fams map[string]*dto.MetricFamily
	for deadline := time.Now().Add(5 * time.Second); ; {
		if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
			resp.Body.Close()
			fams = scrape(t, "http://"+addr+"/metrics", "", "")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing serves metrics.listen %s", addr)
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
	if fams["go_goroutines"] == nil {
		t.Fatal("no metrics at metrics.listen")
	}
	if resp, err := http.Get(url2 + "/metrics"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/metrics on the agent's listener with metrics.listen set: %v %v, want 404", resp, err)
	}
}
