package handoff

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// pushAgentConfig is a config an agent takes push configs with (loopback allowed).
const pushAgentConfig = minimalConfig + "capabilities: {push_notifications: true}\npush: {allow_hosts: [127.0.0.1]}\nlog: {level: error}\n"

func startPushAgent(t *testing.T) string {
	t.Helper()
	c, err := ParseConfig("test.yaml", strings.NewReader(pushAgentConfig))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	return startAgent(t, c)
}

// post sends body to url with the headers and returns the status and body.
func post(t *testing.T, method, url, body string, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// newTaskWithConfig sends a message over JSON-RPC 1.0 and adds push config c1.
func newTaskWithConfig(t *testing.T, base string) string {
	t.Helper()
	v10 := map[string]string{"A2A-Version": "1.0"}
	_, _, b := post(t, "POST", base+pathJSONRPC, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`, v10)
	var res struct {
		Result struct {
			Task struct{ ID string }
		}
	}
	if err := json.Unmarshal(b, &res); err != nil || res.Result.Task.ID == "" {
		t.Fatalf("SendMessage: %s (%v)", b, err)
	}
	id := res.Result.Task.ID
	_, _, b = post(t, "POST", base+pathJSONRPC, `{"jsonrpc":"2.0","id":2,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"`+id+`","id":"c1","url":"http://127.0.0.1:9/hook"}}`, v10)
	if !bytes.Contains(b, []byte(`"result"`)) {
		t.Fatalf("CreateTaskPushNotificationConfig: %s", b)
	}
	return id
}

// TestJSONRPCDeleteHasResult: a successful delete answers with a result
// member (JSON-RPC 2.0 wants result or error), on 1.0 and 0.3, also when the
// config was already gone.
func TestJSONRPCDeleteHasResult(t *testing.T) {
	base := startPushAgent(t)
	for _, tc := range []struct{ name, version, body string }{
		{"1.0", "1.0", `{"jsonrpc":"2.0","id":7,"method":"DeleteTaskPushNotificationConfig","params":{"taskId":"TASK","id":"c1"}}`},
		{"0.3", "", `{"jsonrpc":"2.0","id":7,"method":"tasks/pushNotificationConfig/delete","params":{"id":"TASK","pushNotificationConfigId":"c1"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := newTaskWithConfig(t, base)
			for i := range 2 {
				status, _, b := post(t, "POST", base+pathJSONRPC, strings.ReplaceAll(tc.body, "TASK", id), map[string]string{"A2A-Version": tc.version})
				var env map[string]json.RawMessage
				if err := json.Unmarshal(b, &env); err != nil || status != http.StatusOK {
					t.Fatalf("delete #%d: %d %s (%v)", i+1, status, b, err)
				}
				if _, ok := env["result"]; !ok || env["error"] != nil {
					t.Errorf("delete #%d answered %s, want a result member and no error", i+1, b)
				}
				if string(env["id"]) != "7" {
					t.Errorf("delete #%d: id %s, want 7", i+1, env["id"])
				}
			}
		})
	}
}

// TestRESTDeleteHasJSONBody: the REST delete answers a JSON body, not 0 bytes.
func TestRESTDeleteHasJSONBody(t *testing.T) {
	base := startPushAgent(t)
	id := newTaskWithConfig(t, base)
	for i := range 2 {
		status, h, b := post(t, "DELETE", base+pathREST+"/tasks/"+id+"/pushNotificationConfigs/c1", "", map[string]string{"A2A-Version": "1.0"})
		if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || !json.Valid(b) || len(b) == 0 {
			t.Errorf("REST delete #%d: %d %q %q, want 200 with a JSON body", i+1, status, h.Get("Content-Type"), b)
		}
	}
}

// TestJSONRPCTrailingSlash: the JSON-RPC endpoint answers at its URL with a
// trailing slash too, as a widely used test client posts there.
func TestJSONRPCTrailingSlash(t *testing.T) {
	base := startPushAgent(t)
	status, _, b := post(t, "POST", base+pathJSONRPC+"/", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"nope"}}`, map[string]string{"A2A-Version": "1.0"})
	if status != http.StatusOK || !bytes.Contains(b, []byte("-32001")) {
		t.Errorf("POST %s/: %d %s, want a JSON-RPC TaskNotFound", pathJSONRPC, status, b)
	}
}

// TestJSONRPCErrorsCarryErrorInfo: errors the agent writes itself (an
// unsupported version here) carry a google.rpc.ErrorInfo in data, as a2a-go's
// handler does for the others (A2A 1.0, 9.5).
func TestJSONRPCErrorsCarryErrorInfo(t *testing.T) {
	base := startPushAgent(t)
	_, _, b := post(t, "POST", base+pathJSONRPC, `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"nope"}}`, map[string]string{"A2A-Version": "9.9"})
	var env struct {
		Error struct {
			Code int
			Data []map[string]any
		}
	}
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	if env.Error.Code != -32009 || len(env.Error.Data) == 0 || env.Error.Data[0]["@type"] != "type.googleapis.com/google.rpc.ErrorInfo" || env.Error.Data[0]["reason"] != "VERSION_NOT_SUPPORTED" {
		t.Errorf("unsupported version: %s, want -32009 with an ErrorInfo VERSION_NOT_SUPPORTED in data", b)
	}
}

// TestREST03V1Paths: 0.3 REST clients of the official SDKs (JS, Python)
// send proto JSON to the spec's /v1 paths; a2a-go's a2av0 client sends its
// own dialect to the bare paths. Both are answered, each in its own form.
func TestREST03V1Paths(t *testing.T) {
	base := startPushAgent(t)
	status, _, b := post(t, "POST", base+pathREST+"/v1/message:send",
		`{"message":{"messageId":"m1","role":"ROLE_USER","content":[{"text":"hi"}]}}`, nil)
	var proto struct {
		Task struct {
			ID     string
			Status struct{ State string }
		}
	}
	if err := json.Unmarshal(b, &proto); err != nil || status != http.StatusOK || proto.Task.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("POST /v1/message:send: %d %s, want a completed task in proto JSON", status, b)
	}
	status, _, b = post(t, "GET", base+pathREST+"/v1/tasks/"+proto.Task.ID+"?historyLength=1", "", nil)
	if status != http.StatusOK || !bytes.Contains(b, []byte(`"TASK_STATE_COMPLETED"`)) {
		t.Errorf("GET /v1/tasks/ID: %d %s", status, b)
	}
	status, _, b = post(t, "GET", base+pathREST+"/v1/tasks/no-such-task", "", nil)
	if status != http.StatusNotFound || !bytes.Contains(b, []byte(`"code":-32001`)) {
		t.Errorf("GET /v1/tasks/no-such-task: %d %s, want 404 with code -32001", status, b)
	}
	status, _, b = post(t, "POST", base+pathREST+"/message:send",
		`{"message":{"kind":"message","messageId":"m2","role":"user","parts":[{"kind":"text","text":"hi"}]}}`, nil)
	if status != http.StatusOK || !bytes.Contains(b, []byte(`"kind":"task"`)) {
		t.Errorf("POST /message:send: %d %s, want a 0.3 task in a2a-go's form", status, b)
	}
}

// TestJSONRPC03EmptyListIsArray: the 0.3 push config list of a task without
// configs answers [], not null (its result is an array).
func TestJSONRPC03EmptyListIsArray(t *testing.T) {
	base := startPushAgent(t)
	id := newTaskWithConfig(t, base)
	post(t, "POST", base+pathJSONRPC, `{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/delete","params":{"id":"`+id+`","pushNotificationConfigId":"c1"}}`, nil)
	_, _, b := post(t, "POST", base+pathJSONRPC, `{"jsonrpc":"2.0","id":2,"method":"tasks/pushNotificationConfig/list","params":{"id":"`+id+`"}}`, nil)
	var env struct{ Result json.RawMessage }
	if err := json.Unmarshal(b, &env); err != nil || string(env.Result) != "[]" {
		t.Errorf("empty 0.3 list: %s, want result []", b)
	}
}
