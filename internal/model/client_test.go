package model_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/examples/scriptedmodel/script"
	"github.com/handoff-a2a/handoff/internal/model"
)

// recorder wraps a handler and keeps each request's Authorization header.
type recorder struct {
	h    http.Handler
	mu   sync.Mutex
	auth []string
	at   []time.Time
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.auth, r.at = append(r.auth, req.Header.Get("Authorization")), append(r.at, time.Now())
	r.mu.Unlock()
	r.h.ServeHTTP(w, req)
}

func startRecorded(t *testing.T, yamlScript string) (*recorder, string) {
	t.Helper()
	s, err := script.Parse([]byte(yamlScript))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{h: script.NewServer(s)}
	hs := httptest.NewServer(rec)
	t.Cleanup(hs.Close)
	return rec, hs.URL + "/v1"
}

func intp(n int) *int { return &n }

func TestClientRetriesHonouringRetryAfter(t *testing.T) {
	rec, url := startRecorded(t, `
rules:
  - fail: {status: 429, retry_after: "1", times: 1}
    say: "hello"
`)
	c := model.NewClient(model.Endpoint{Name: "m", BaseURL: url, Model: "m", MaxRetries: intp(2)}, "sk-test-secret", nil)
	reply, err := c.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if reply.Content != "hello" {
		t.Fatalf("reply %+v", reply)
	}
	if len(rec.at) != 2 {
		t.Fatalf("%d requests, want 2 (one retry)", len(rec.at))
	}
	if wait := rec.at[1].Sub(rec.at[0]); wait < 900*time.Millisecond {
		t.Errorf("retried after %v; Retry-After asked for 1s", wait)
	}
	if rec.auth[0] != "Bearer sk-test-secret" {
		t.Errorf("Authorization %q", rec.auth[0])
	}
}

func TestClientErrorsCarryNoKey(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retries int
		want    int
	}{{"no retries", 0, 1}, {"two retries", 2, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			rec, url := startRecorded(t, `rules: [{fail: {status: 500, retry_after: "0"}}]`)
			c := model.NewClient(model.Endpoint{Name: "m", BaseURL: url, Model: "m", MaxRetries: intp(tc.retries)}, "sk-test-secret", nil)
			_, err := c.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
			if err == nil || !strings.Contains(err.Error(), "status 500") {
				t.Fatalf("Complete: %v, want status 500", err)
			}
			if strings.Contains(err.Error(), "sk-test-secret") || strings.Contains(err.Error(), url) {
				t.Errorf("error %q shows the key or the URL", err)
			}
			if len(rec.auth) != tc.want {
				t.Errorf("%d requests, want %d", len(rec.auth), tc.want)
			}
		})
	}
}

func TestClientReadsNoOpenAIEnvironment(t *testing.T) {
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("the client went to OPENAI_BASE_URL")
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(trap.Close)
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", trap.URL)
	rec, url := startRecorded(t, `rules: [{say: "hello"}]`)
	c := model.NewClient(model.Endpoint{Name: "m", BaseURL: url, Model: "m"}, "", nil)
	if _, err := c.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	if rec.auth[0] != "" {
		t.Errorf("Authorization %q: a key the config did not name was sent", rec.auth[0])
	}
}

func TestClientTimeout(t *testing.T) {
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); hs.Close() })
	c := model.NewClient(model.Endpoint{Name: "m", BaseURL: hs.URL + "/v1", Model: "m", Timeout: 100 * time.Millisecond, MaxRetries: intp(0)}, "", nil)
	start := time.Now()
	_, err := c.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	if err == nil {
		t.Fatal("Complete returned no error past its timeout")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Complete took %v with a 100ms timeout", d)
	}
}

func TestSecretLogsRedacted(t *testing.T) {
	k := model.Secret("sk-abc")
	for _, s := range []string{k.String(), k.GoString(), k.LogValue().String()} {
		if strings.Contains(s, "sk-abc") {
			t.Errorf("%q shows the key", s)
		}
	}
}
