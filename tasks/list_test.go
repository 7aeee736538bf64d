package tasks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/tasks"
)

// bulkyExec completes every task with an artifact as large as its message.
type bulkyExec struct{}

func (bulkyExec) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) ||
			!yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart(ec.Message.Parts[0].Text())), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (bulkyExec) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// asAlice serves the engine as one authenticated caller.
type asAlice struct{ *tasks.Engine }

func (a asAlice) ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	if cc, ok := a2asrv.CallContextFrom(ctx); ok {
		cc.User = a2asrv.NewAuthenticatedUser("alice", nil)
	}
	return a.Engine.ListTasks(ctx, req)
}

// TestListTasksBounded: 25 tasks of about 4 MB for each of two callers
// (anonymous, authenticated) are listed without their history and artifacts
// unless asked; a page never exceeds the byte cap (a larger task comes
// alone, trimmed as asked) and continues with a page token; four lists at
// once, over JSON-RPC on a real socket, keep the heap bounded.
func TestListTasksBounded(t *testing.T) {
	const (
		n        = 25
		half     = 2 << 20 // the message, and the artifact: a task holds both
		pageCap  = 3 << 20
		heapDiff = 256 << 20
	)
	_, e := openEngine(t, t.TempDir(), bulkyExec{}, tasks.WithListPageBytes(pageCap))
	alice := asUser(t.Context(), "alice")
	for i := range n {
		for _, ctx := range []context.Context{t.Context(), alice} {
			text := fmt.Sprintf("%02d", i) + strings.Repeat("x", half)
			if _, err := e.SendMessage(ctx, send(text)); err != nil {
				t.Fatal(err)
			}
		}
	}
	anon := httptest.NewServer(a2asrv.NewJSONRPCHandler(e))
	defer anon.Close()
	authed := httptest.NewServer(a2asrv.NewJSONRPCHandler(asAlice{e}))
	defer authed.Close()

	// list posts one ListTasks and returns the page and its size on the wire.
	list := func(url, params string) (*a2a.ListTasksResponse, int, error) {
		body := `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":` + params + `}`
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			return nil, 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, 0, err
		}
		var out struct {
			Result *a2a.ListTasksResponse `json:"result"`
			Error  any                    `json:"error"`
		}
		if err := json.Unmarshal(b, &out); err != nil || out.Result == nil {
			return nil, len(b), fmt.Errorf("ListTasks %s: %v %v", params, out.Error, err)
		}
		return out.Result, len(b), nil
	}

	// Four lists at once, by both callers, while the heap is sampled. A read
	// first waits for the store to have applied every write (its log is
	// applied to bbolt behind the writers), so that the baseline is the
	// store at rest.
	if _, err := e.ListTasks(t.Context(), &a2a.ListTasksRequest{PageSize: 1}); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	stop := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var m runtime.MemStats
		var top uint64
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&m)
			top = max(top, m.HeapInuse)
			select {
			case <-stop:
				peak <- top
				return
			case <-tick.C:
			}
		}
	}()
	var wg sync.WaitGroup
	sizes := make([]int, 4)
	for i := range sizes {
		url := anon.URL
		if i%2 == 1 {
			url = authed.URL
		}
		wg.Go(func() {
			page, size, err := list(url, `{"pageSize":50}`)
			if err != nil {
				t.Error(err)
				return
			}
			sizes[i] = size
			if len(page.Tasks) != n || page.TotalSize != n || page.NextPageToken != "" {
				t.Errorf("list %d: %d tasks of %d, next %q; want all %d on one page", i, len(page.Tasks), page.TotalSize, page.NextPageToken, n)
			}
			for _, tk := range page.Tasks {
				if len(tk.History) != 0 || len(tk.Artifacts) != 0 {
					t.Errorf("list %d: task %s with %d messages and %d artifacts, asked for none", i, tk.ID, len(tk.History), len(tk.Artifacts))
					break
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	grown := int64(<-peak) - int64(base.HeapInuse)
	t.Logf("four concurrent lists: responses of %v bytes; heap in use grew by %d MB at most", sizes, grown>>20)
	for i, s := range sizes {
		if s > 64<<10 {
			t.Errorf("list %d: a response of %d bytes for 25 tasks without history or artifacts", i, s)
		}
	}
	if grown > heapDiff {
		t.Errorf("four concurrent lists grew the heap by %d MB, want at most %d MB", grown>>20, heapDiff>>20)
	}

	// Asked for history and artifacts: pages within the cap, a larger task alone.
	for _, url := range []string{anon.URL, authed.URL} {
		seen := map[a2a.TaskID]bool{}
		token := ""
		for pages := 0; ; pages++ {
			if pages > n {
				t.Fatalf("more than %d pages for %d tasks", n, n)
			}
			page, size, err := list(url, fmt.Sprintf(`{"pageSize":10,"historyLength":1,"includeArtifacts":true,"pageToken":%q}`, token))
			if err != nil {
				t.Fatal(err)
			}
			if size > pageCap && len(page.Tasks) != 1 {
				t.Errorf("a page of %d bytes, over the cap of %d, with %d tasks", size, pageCap, len(page.Tasks))
			}
			for _, tk := range page.Tasks {
				if seen[tk.ID] {
					t.Errorf("task %s listed twice", tk.ID)
				}
				seen[tk.ID] = true
				if len(tk.History) != 1 || len(tk.Artifacts) != 1 {
					t.Errorf("task %s with %d messages and %d artifacts, want 1 and 1", tk.ID, len(tk.History), len(tk.Artifacts))
				}
			}
			if token = page.NextPageToken; token == "" {
				break
			}
		}
		if len(seen) != n {
			t.Errorf("%s: the pages listed %d tasks, want %d", url, len(seen), n)
		}
	}
}
