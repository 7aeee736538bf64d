package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/auth"
	"github.com/handoff-a2a/handoff/internal/console"
	"github.com/handoff-a2a/handoff/tasks"
)

// oneTask is an engine with one task, owned by key:alice, waiting for an
// approval whose request carries a token.
type oneTask struct{ task *a2a.Task }

func (o oneTask) ListTasks(ctx context.Context, _ *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	if !o.mine(ctx) {
		return &a2a.ListTasksResponse{}, nil
	}
	return &a2a.ListTasksResponse{Tasks: []*a2a.Task{o.task}, TotalSize: 1}, nil
}

func (o oneTask) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	if req.ID != o.task.ID || !o.mine(ctx) {
		return nil, a2a.ErrTaskNotFound
	}
	return o.task, nil
}

func (o oneTask) Events(ctx context.Context, id a2a.TaskID) ([]tasks.Event, error) {
	if id != o.task.ID || !o.mine(ctx) {
		return nil, tasks.ErrNotFound
	}
	return []tasks.Event{{Seq: 1, Event: o.task}}, nil
}

func (oneTask) mine(ctx context.Context) bool {
	p, ok := auth.PrincipalFrom(ctx)
	return ok && p.Name == "key:alice"
}

type noApprovals struct{}

func (noApprovals) Pending(context.Context) ([]console.Approval, error) { return nil, nil }
func (noApprovals) Decide(context.Context, a2a.TaskID, console.Decision) (a2a.TaskState, error) {
	return "", console.ErrNoApproval
}

// serve runs a console over oneTask whose authenticator knows alice's and
// bob's keys in X-API-Key.
func serve(t *testing.T) (*console.Console, string) {
	t.Helper()
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateInputRequired,
		Message: a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("waits"),
			a2a.NewDataPart(map[string]any{"approval_request": map[string]any{"tool": "notes__write", "token": "tok-3c9e"}}))}}
	keys := map[string]string{"alice-key": "key:alice", "bob-key": "key:bob"}
	c := console.New(console.Config{Tasks: oneTask{task}, Events: oneTask{task}, Approvals: noApprovals{}, APIKeyHeader: "X-API-Key",
		Authenticate: func(r *http.Request) (*auth.Principal, error) {
			if name, ok := keys[r.Header.Get("X-API-Key")]; ok {
				return &auth.Principal{Name: name}, nil
			}
			return nil, errors.New("unknown key")
		}})
	mux := http.NewServeMux()
	mux.Handle(console.Prefix+"/", c.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return c, srv.URL
}

// client signs in with key and returns a client holding the session.
func client(t *testing.T, base, key string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	resp, err := hc.Post(base+"/console/api/session", "application/json", strings.NewReader(`{"api_key":"`+key+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in with %s: %d", key, resp.StatusCode)
	}
	return hc
}

func get(t *testing.T, hc *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTimelineHidesTokens: the owner's timeline holds the approval request
// without its token; another caller's read of it is 404.
func TestTimelineHidesTokens(t *testing.T) {
	_, base := serve(t)
	status, body := get(t, client(t, base, "alice-key"), base+"/console/api/tasks/t1")
	if status != http.StatusOK || !strings.Contains(body, "notes__write") {
		t.Fatalf("alice's timeline: %d %s", status, body)
	}
	if strings.Contains(body, "tok-3c9e") || strings.Contains(body, `"token"`) {
		t.Errorf("the timeline holds the approval token: %s", body)
	}
	if status, body := get(t, client(t, base, "bob-key"), base+"/console/api/tasks/t1"); status != http.StatusNotFound {
		t.Errorf("bob reads alice's task: %d %s", status, body)
	}
}

// TestAssetsUnderPolicy: the page and its assets are served from the
// binary, each under the strict policy, and unknown paths are 404.
func TestAssetsUnderPolicy(t *testing.T) {
	_, base := serve(t)
	for path, want := range map[string]int{"/console/": 200, "/console/assets/app.js": 200, "/console/assets/app.css": 200,
		"/console/assets/nope.js": 404, "/console/elsewhere": 404} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: policy %q", path, csp)
		}
		if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: headers %v", path, resp.Header)
		}
	}
}

// TestStreamShowsOwnTasks: a commit of alice's task reaches alice's
// stream as its summary, and Notify never blocks, even with a stream (bob's)
// that reads nothing; EndStreams ends the streams.
func TestStreamShowsOwnTasks(t *testing.T) {
	c, base := serve(t)
	open := func(key string) *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"/console/api/stream", nil)
		resp, err := client(t, base, key).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	// Bob's stream is never read; a thousand ids are more than any stream's buffer.
	alice, _ := open("alice-key"), open("bob-key")
	for range 1000 {
		c.Notify("t1")
	}
	lines := make(chan string)
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := alice.Body.Read(b)
			if n > 0 {
				lines <- string(b[:n])
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	deadline := time.After(5 * time.Second)
	var got strings.Builder
	for !strings.Contains(got.String(), "event: task\ndata: ") {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("alice's stream ended: %q", got.String())
			}
			got.WriteString(l)
		case <-deadline:
			t.Fatalf("alice's stream shows no task: %q", got.String())
		}
	}
	_, data, _ := strings.Cut(got.String(), "event: task\ndata: ")
	data, _, _ = strings.Cut(data, "\n")
	var summary struct{ ID, State string }
	if err := json.Unmarshal([]byte(data), &summary); err != nil || summary.ID != "t1" || summary.State != string(a2a.TaskStateInputRequired) {
		t.Errorf("alice's task event: %q (%v)", data, err)
	}
	c.EndStreams()
	for range lines { // the stream ends
	}
}
