package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// maxBody is the e2e agent's limits.max_body_bytes: small, so a body over it
// is cheap to send.
const maxBody = 16 << 10

// rpcReply is a JSON-RPC response as it travels.
type rpcReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      any             `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// post sends body to url with the A2A-Version header set to version (none
// when empty) and returns the response with its body read whole.
func post(t *testing.T, url, version string, body io.Reader, contentLength int64) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(callCtx(t), http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = contentLength
	req.Header.Set("Content-Type", "application/json")
	if version != "" {
		req.Header.Set(a2a.SvcParamVersion, version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading the response (status %d) failed: %v; got %q", url, resp.StatusCode, err, data)
	}
	return resp, data
}

func decodeReply(t *testing.T, data []byte) rpcReply {
	t.Helper()
	var r rpcReply
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("response is not JSON: %v: %q", err, data)
	}
	return r
}

// TestBadInput sends what a broken or hostile client might over real HTTP
// and requires the exact JSON-RPC error for each, in both protocol versions
// where the request has a meaning in both. Afterwards a task stored before
// is unchanged.
func TestBadInput(t *testing.T) {
	ag := startAgent(t, agentConfig{maxBodyBytes: maxBody})
	c := jsonrpcClient(t, ag)
	stored := sendTask(t, c, &a2a.SendMessageRequest{Message: userMessage(uniqueID("tck-artifact-text"), "keep me")})
	before := asJSON(t, getTask(t, c, stored.ID))
	url := ag.base + "/a2a/jsonrpc"

	type version struct {
		name, header                string
		send, get, message, roleKey string
	}
	versions := []version{
		{name: "1.0", header: "1.0", send: "SendMessage", get: "GetTask",
			message: `{"messageId":"m-1","role":"ROLE_USER","parts":[]}`},
		// No header: a 0.3 request, as the 1.0 spec says.
		{name: "0.3", header: "", send: "message/send", get: "tasks/get",
			message: `{"kind":"message","messageId":"m-1","role":"user","parts":[]}`},
	}
	for _, v := range versions {
		cases := []struct {
			name     string
			body     string
			wantCode int
		}{
			{"malformed JSON", `{"jsonrpc":"2.0","id":1,"method":"` + v.get + `","params":{"id":`, -32700},
			{"unknown method", `{"jsonrpc":"2.0","id":2,"method":"NoSuchMethod","params":{}}`, -32601},
			{"message without parts", `{"jsonrpc":"2.0","id":3,"method":"` + v.send + `","params":{"message":` + v.message + `}}`, -32602},
			{"unknown task", `{"jsonrpc":"2.0","id":4,"method":"` + v.get + `","params":{"id":"no-such-task"}}`, -32001},
		}
		for _, tc := range cases {
			t.Run(v.name+"/"+tc.name, func(t *testing.T) {
				resp, data := post(t, url, v.header, strings.NewReader(tc.body), int64(len(tc.body)))
				r := decodeReply(t, data)
				if r.Error == nil || r.Error.Code != tc.wantCode || r.JSONRPC != "2.0" {
					t.Fatalf("status %d, body %s; want JSON-RPC error %d", resp.StatusCode, data, tc.wantCode)
				}
				if r.Error.Message == "" {
					t.Fatalf("error %d has no message: %s", r.Error.Code, data)
				}
			})
		}
	}

	t.Run("unsupported A2A-Version", func(t *testing.T) {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":"v-9","method":"GetTask","params":{"id":%q}}`, stored.ID)
		resp, data := post(t, url, "9.9", strings.NewReader(body), int64(len(body)))
		r := decodeReply(t, data)
		if r.Error == nil || r.Error.Code != -32009 || r.ID != "v-9" || len(r.Result) != 0 {
			t.Fatalf("status %d, body %s; want error -32009 for id v-9 and no result", resp.StatusCode, data)
		}
		if !strings.Contains(r.Error.Message, "9.9") {
			t.Fatalf("error message %q does not name the refused version 9.9", r.Error.Message)
		}
	})

	// A body over limits.max_body_bytes: HTTP 413 with a JSON-RPC error
	// saying why, and the connection closed after a whole response. Once
	// with the length announced (refused before reading) and once chunked
	// (refused after reading one byte past the limit).
	over := overLimitBody(maxBody * 4)
	for _, tc := range []struct {
		name          string
		contentLength int64
	}{
		{"over the body limit, Content-Length", int64(len(over))},
		{"over the body limit, chunked", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = bytes.NewReader(over)
			if tc.contentLength < 0 {
				body = io.MultiReader(body) // hides the length: sent chunked
			}
			resp, data := post(t, url, "1.0", body, tc.contentLength)
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("status %d, body %q; want 413", resp.StatusCode, data)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("Content-Type = %q, want application/json", ct)
			}
			r := decodeReply(t, data)
			if r.Error == nil || r.Error.Code != -32600 || !strings.Contains(r.Error.Message, fmt.Sprint(maxBody)) {
				t.Fatalf("body %s; want error -32600 naming the limit %d", data, maxBody)
			}
			if !resp.Close {
				t.Fatalf("response does not close the connection (Connection: %q); the rest of the body was never read", resp.Header.Get("Connection"))
			}
		})
	}

	// A body right at the limit is still served.
	t.Run("at the body limit", func(t *testing.T) {
		body := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":5,"method":"GetTask","params":{"id":%q}}`, stored.ID))
		body = append(body, bytes.Repeat([]byte(" "), maxBody-len(body))...)
		resp, data := post(t, url, "1.0", bytes.NewReader(body), int64(len(body)))
		r := decodeReply(t, data)
		if resp.StatusCode != http.StatusOK || r.Error != nil || len(r.Result) == 0 {
			t.Fatalf("status %d, body %s; want the task", resp.StatusCode, data)
		}
	})

	if after := asJSON(t, getTask(t, c, stored.ID)); after != before {
		t.Fatalf("stored task changed by the bad requests:\n got %s\nwant %s", after, before)
	}
}

// overLimitBody is a syntactically valid SendMessage request of about n
// bytes, so only its size is wrong.
func overLimitBody(n int) []byte {
	pad := strings.Repeat("x", n)
	return []byte(`{"jsonrpc":"2.0","id":9,"method":"SendMessage","params":{"message":{"messageId":"big","role":"ROLE_USER","parts":[{"text":"` + pad + `"}]}}}`)
}

// TestRESTStreamErrorsAreHTTPErrors asks for streams that cannot start: a
// subscription to an unknown task and a message to an unknown task on
// message:stream. Each answers an HTTP error status with a JSON body, not
// an SSE stream carrying the error.
func TestRESTStreamErrorsAreHTTPErrors(t *testing.T) {
	ag := startAgent(t, agentConfig{})
	rest := ag.base + "/a2a/rest"
	cases := []struct {
		name, method, path, body string
	}{
		// a2a-go's REST client subscribes with POST; GET is what the brief
		// and some clients use. Both must answer 404.
		{"POST subscribe", http.MethodPost, "/tasks/no-such-task:subscribe", ""},
		{"GET subscribe", http.MethodGet, "/tasks/no-such-task:subscribe", ""},
		{"stream to unknown task", http.MethodPost, "/message:stream",
			`{"message":{"messageId":"m-404","taskId":"no-such-task","role":"ROLE_USER","parts":[{"text":"hi"}]}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(callCtx(t), tc.method, rest+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(a2a.SvcParamVersion, "1.0")
			req.Header.Set("Accept", "text/event-stream")
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.method, tc.path, err)
			}
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("read body: %v", err)
			}
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("status %d, Content-Type %q, body %q; want 404", resp.StatusCode, resp.Header.Get("Content-Type"), data)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("Content-Type = %q, want application/json (not an SSE stream); body %q", ct, data)
			}
			var env struct {
				Error *struct {
					Code    int    `json:"code"`
					Status  string `json:"status"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(data, &env); err != nil || env.Error == nil {
				t.Fatalf("body %q is not a JSON error: %v", data, err)
			}
			if env.Error.Code != http.StatusNotFound || env.Error.Status != "NOT_FOUND" || !strings.Contains(env.Error.Message, "no-such-task") {
				t.Fatalf("error = %+v, want code 404, status NOT_FOUND and a message naming the task", *env.Error)
			}
		})
	}
}
