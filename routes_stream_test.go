package handoff

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// streamLines posts a JSON-RPC 1.0 request and returns the response with the
// id and data lines of its server-sent events.
func streamLines(t *testing.T, url, body string) (resp *http.Response, ids, data []string) {
	t.Helper()
	resp = openJSONRPC(t, t.Context(), url, "1.0", body)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			ids = append(ids, v)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return resp, ids, data
}

// TestStreamJSONRPCWritesWhatA2AGoWrites checks the JSON-RPC 1.0 stream
// written by streamJSONRPC against a2a-go's encoding of the same events: a
// task, status updates and appended artifact chunks, each with an event id.
func TestStreamJSONRPCWritesWhatA2AGoWrites(t *testing.T) {
	url := startAgent(t, testConfig(t))
	for _, id := range []string{`"s-1"`, `42`, `1.5`} {
		resp, ids, data := streamLines(t, url, `{"jsonrpc":"2.0","id":`+id+`,"method":"SendStreamingMessage","params":{"message":{"messageId":"tck-stream-artifact-chunked-1","role":"ROLE_USER","parts":[{"text":"<b>&</b>"}]}}}`)
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("id %s: Content-Type %q, want text/event-stream", id, ct)
		}
		if len(data) < 3 || len(ids) != len(data) {
			t.Fatalf("id %s: %d events with %d ids, want at least 3, each with an id:\n%s", id, len(data), len(ids), strings.Join(data, "\n"))
		}
		var last a2a.Event
		for _, d := range data {
			var env struct {
				JSONRPC string             `json:"jsonrpc"`
				ID      json.RawMessage    `json:"id"`
				Result  a2a.StreamResponse `json:"result"`
			}
			if err := json.Unmarshal([]byte(d), &env); err != nil {
				t.Fatalf("id %s: event %s: %v", id, d, err)
			}
			want, err := json.Marshal(struct {
				JSONRPC string             `json:"jsonrpc"`
				ID      json.RawMessage    `json:"id"`
				Result  a2a.StreamResponse `json:"result"`
			}{"2.0", env.ID, env.Result})
			if err != nil {
				t.Fatal(err)
			}
			if string(env.ID) != id || d != string(want) {
				t.Fatalf("id %s: event\n%s\na2a-go writes\n%s", id, d, want)
			}
			last = env.Result.Event
		}
		if !endsWithState(last, a2a.TaskStateCompleted) {
			t.Fatalf("id %s: last event %T %+v, want the completed status", id, last, last)
		}
	}
}

func endsWithState(ev a2a.Event, s a2a.TaskState) bool {
	u, ok := ev.(*a2a.TaskStatusUpdateEvent)
	return ok && u.Status.State == s
}

// TestStreamJSONRPCFallsBackToA2AGo checks the requests streamJSONRPC leaves
// to a2a-go: a stream whose first answer is an error, an id a2a-go answers
// as it is (null), and a body with a second value after the request.
func TestStreamJSONRPCFallsBackToA2AGo(t *testing.T) {
	url := startAgent(t, testConfig(t))
	_, _, data := streamLines(t, url, `{"jsonrpc":"2.0","id":"e","method":"SendStreamingMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}}}`)
	if len(data) != 1 || !strings.Contains(data[0], `"code":-32602`) || !strings.Contains(data[0], `"reason":"INVALID_PARAMS"`) {
		t.Fatalf("a message without parts: events %q, want one a2a-go error event with code -32602 and its ErrorInfo", data)
	}
	_, _, data = streamLines(t, url, `{"jsonrpc":"2.0","id":null,"method":"SendStreamingMessage","params":{"message":{"messageId":"tck-complete-task-1","role":"ROLE_USER","parts":[{"text":"x"}]}}}`)
	if len(data) < 2 || !strings.Contains(data[len(data)-1], `"TASK_STATE_COMPLETED"`) || !strings.Contains(data[0], `"id":null`) {
		t.Fatalf("id null: events %q, want the task's events from a2a-go", data)
	}
	_, _, data = streamLines(t, url, `{"jsonrpc":"2.0","id":9,"method":"SendStreamingMessage","params":{"message":{"messageId":"tck-complete-task-2","role":"ROLE_USER","parts":[{"text":"x"}]}}} {}`)
	if len(data) < 2 || !strings.Contains(data[len(data)-1], `"TASK_STATE_COMPLETED"`) {
		t.Fatalf("trailing value: events %q, want the task's events from a2a-go, which reads the first value only", data)
	}
}

// TestSendJSONRPCWritesWhatA2AGoWrites checks a JSON-RPC 1.0 SendMessage
// answer against a2a-go's encoding of the same task, and that an error is
// a2a-go's own answer.
func TestSendJSONRPCWritesWhatA2AGoWrites(t *testing.T) {
	url := startAgent(t, testConfig(t))
	post := func(body string) string {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", url+pathJSONRPC, strings.NewReader(body))
		req.Header.Set("A2A-Version", "1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type %q, want application/json", ct)
		}
		var b strings.Builder
		if _, err := bufio.NewReader(resp.Body).WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for _, msg := range []string{"tck-artifact-text-1", "tck-message-response-1"} {
		got := post(`{"jsonrpc":"2.0","id":"q","method":"SendMessage","params":{"message":{"messageId":"` + msg + `","role":"ROLE_USER","parts":[{"text":"<i>"}]}}}`)
		var env struct {
			Result a2a.StreamResponse `json:"result"`
		}
		if err := json.Unmarshal([]byte(got), &env); err != nil || env.Result.Event == nil {
			t.Fatalf("%s: answer %s: %v", msg, got, err)
		}
		want, err := json.Marshal(struct {
			JSONRPC string             `json:"jsonrpc"`
			ID      string             `json:"id"`
			Result  a2a.StreamResponse `json:"result"`
		}{"2.0", "q", env.Result})
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want)+"\n" {
			t.Fatalf("%s: answer\n%s\na2a-go writes\n%s", msg, got, want)
		}
	}
	got := post(`{"jsonrpc":"2.0","id":"e","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}}}`)
	if !strings.Contains(got, `"code":-32602`) || !strings.Contains(got, `"reason":"INVALID_PARAMS"`) || !strings.Contains(got, `"id":"e"`) {
		t.Fatalf("a message without parts: answer %s, want a2a-go's error with code -32602 and its ErrorInfo", got)
	}
}

// TestGetTaskJSONRPCWritesWhatA2AGoWrites checks a JSON-RPC 1.0 GetTask
// answer against a2a-go's encoding of the same task, and that an unknown
// task is answered by a2a-go.
func TestGetTaskJSONRPCWritesWhatA2AGoWrites(t *testing.T) {
	url := startAgent(t, testConfig(t))
	_, sent := postJSONRPC(t, url, "1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"tck-artifact-data-1","role":"ROLE_USER","parts":[{"text":"<i>"}]}}}`)
	task, _ := sent["result"].(map[string]any)["task"].(map[string]any)
	if task == nil {
		t.Fatalf("SendMessage answered %v", sent)
	}
	get := func(id string) string {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", url+pathJSONRPC,
			strings.NewReader(`{"jsonrpc":"2.0","id":2.5,"method":"GetTask","params":{"id":"`+id+`"}}`))
		req.Header.Set("A2A-Version", "1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		if _, err := bufio.NewReader(resp.Body).WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	got := get(task["id"].(string))
	var env struct {
		Result *a2a.Task `json:"result"`
	}
	if err := json.Unmarshal([]byte(got), &env); err != nil || env.Result == nil || len(env.Result.Artifacts) == 0 {
		t.Fatalf("GetTask answered %s (%v), want the task with its artifact", got, err)
	}
	want, err := json.Marshal(struct {
		JSONRPC string    `json:"jsonrpc"`
		ID      float64   `json:"id"`
		Result  *a2a.Task `json:"result"`
	}{"2.0", 2.5, env.Result})
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want)+"\n" {
		t.Fatalf("GetTask answer\n%s\na2a-go writes\n%s", got, want)
	}
	if got := get("no-such-task"); !strings.Contains(got, `"code":-32001`) || !strings.Contains(got, `"reason":"TASK_NOT_FOUND"`) {
		t.Fatalf("unknown task: answer %s, want a2a-go's error with code -32001 and its ErrorInfo", got)
	}
}

// TestStreamJSONRPCFlushesBeforeWaiting streams a task whose agent works
// for ten seconds after its working status: the events before the wait
// reach the client during it, not with the end of the stream.
func TestStreamJSONRPCFlushesBeforeWaiting(t *testing.T) {
	url := startAgent(t, testConfig(t))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"test-resubscribe-message-id-1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`
	resp := openJSONRPC(t, ctx, url, "1.0", body)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var working bool
	for !working && sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var env struct {
				Result a2a.StreamResponse `json:"result"`
			}
			if err := json.Unmarshal([]byte(d), &env); err != nil {
				t.Fatalf("event %s: %v", d, err)
			}
			working = endsWithState(env.Result.Event, a2a.TaskStateWorking)
		}
	}
	if !working {
		t.Fatalf("no working status before the agent's wait ended (or 5 s passed): %v", sc.Err())
	}
}
