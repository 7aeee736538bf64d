package script_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/handoff-a2a/handoff/examples/scriptedmodel/script"
)

func start(t *testing.T, src string) (*httptest.Server, *script.Server) {
	t.Helper()
	s, err := script.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	srv := script.NewServer(s)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs, srv
}

type reply struct {
	Choices []struct {
		Message struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
}

func post(t *testing.T, url string, body any) (int, reply, http.Header) {
	t.Helper()
	b, _ := json.Marshal(body)
	res, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var r reply
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatalf("decode %s: %v", data, err)
		}
	}
	return res.StatusCode, r, res.Header
}

func tools(names ...string) []any {
	var out []any
	for _, n := range names {
		out = append(out, map[string]any{"type": "function", "function": map[string]any{"name": n, "parameters": map[string]any{"type": "object"}}})
	}
	return out
}

const notes = `
rules:
  - when: {last: user, offered: "notes__a*"}
    calls: [{tool: "notes__a*", arguments: {text: "{{.User}}", n: 2}}]
  - when: {last: user}
    calls: [{tool: "notes__delete", arguments: {}, force: true}]
  - when: {last: tool, after: "notes__*"}
    say: "Saved: {{.Result}}"
`

func TestCallsAnOfferedToolWithTemplatedArguments(t *testing.T) {
	hs, srv := start(t, notes)
	code, r, _ := post(t, hs.URL, map[string]any{"model": "m", "tools": tools("mail__send", "notes__add"),
		"messages": []any{map[string]any{"role": "user", "content": "buy milk"}}})
	if code != http.StatusOK || len(r.Choices) != 1 || r.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("status %d, reply %+v", code, r)
	}
	tc := r.Choices[0].Message.ToolCalls
	if len(tc) != 1 || tc[0].Function.Name != "notes__add" || tc[0].Function.Arguments != `{"n":2,"text":"buy milk"}` || tc[0].ID == "" {
		t.Fatalf("tool calls %+v", tc)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests recorded", n)
	}
}

func TestCallsAToolNotOfferedOnlyWhenForced(t *testing.T) {
	hs, _ := start(t, notes)
	_, r, _ := post(t, hs.URL, map[string]any{"model": "m", "tools": tools("mail__send"),
		"messages": []any{map[string]any{"role": "user", "content": "x"}}})
	if tc := r.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Name != "notes__delete" {
		t.Fatalf("tool calls %+v, want the forced notes__delete", tc)
	}
	hs, _ = start(t, `
rules:
  - when: {last: user}
    calls: [{tool: "notes__delete"}]
  - say: fallback
`)
	_, r, _ = post(t, hs.URL, map[string]any{"model": "m", "tools": tools("mail__send"),
		"messages": []any{map[string]any{"role": "user", "content": "x"}}})
	if m := r.Choices[0].Message; len(m.ToolCalls) != 0 || m.Content == nil || *m.Content != "fallback" {
		t.Fatalf("message %+v: an unforced call of a tool not offered must not be sent", m)
	}
}

func TestQuotesAToolResult(t *testing.T) {
	hs, _ := start(t, notes)
	_, r, _ := post(t, hs.URL, map[string]any{"model": "m", "messages": []any{
		map[string]any{"role": "user", "content": "buy milk"},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "notes__add", "arguments": "{}"}}}},
		map[string]any{"role": "tool", "tool_call_id": "c1", "content": []any{map[string]any{"type": "text", "text": "note 7"}}},
	}})
	if m := r.Choices[0].Message; m.Content == nil || *m.Content != "Saved: note 7" || r.Choices[0].FinishReason != "stop" {
		t.Fatalf("message %+v", m)
	}
}

func TestSearchThenCall(t *testing.T) {
	hs, _ := start(t, `
rules:
  - when: {last: tool, after: search_tools}
    calls: [{tool: call_tool, arguments: {name: "{{.Hit}}", arguments: {}}}]
`)
	_, r, _ := post(t, hs.URL, map[string]any{"model": "m", "tools": tools("search_tools", "call_tool"), "messages": []any{
		map[string]any{"role": "user", "content": "rain?"},
		map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "search_tools", "arguments": "{}"}}}},
		map[string]any{"role": "tool", "tool_call_id": "c1", "content": `{"status":"success","output":[{"name":"weather__now"},{"name":"other"}]}`},
	}})
	if tc := r.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Arguments != `{"arguments":{},"name":"weather__now"}` {
		t.Fatalf("tool calls %+v", tc)
	}
}

func TestFailsAsScriptedThenAnswers(t *testing.T) {
	hs, _ := start(t, `rules: [{fail: {status: 429, retry_after: "2", times: 1}, say: ok}]`)
	code, _, h := post(t, hs.URL, map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "x"}}})
	if code != http.StatusTooManyRequests || h.Get("Retry-After") != "2" {
		t.Fatalf("first: %d, Retry-After %q", code, h.Get("Retry-After"))
	}
	if code, r, _ := post(t, hs.URL, map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "x"}}}); code != http.StatusOK || *r.Choices[0].Message.Content != "ok" {
		t.Fatalf("second: %d %+v", code, r)
	}
}

func TestModelsAndDebugRequests(t *testing.T) {
	hs, _ := start(t, `{"model": "tiny", "rules": [{"say": "hi"}]}`)
	post(t, hs.URL, map[string]any{"model": "tiny", "tools": tools("a__b"), "messages": []any{map[string]any{"role": "user", "content": "x"}}})
	res, err := http.Get(hs.URL + "/debug/requests")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var dbg struct {
		Count    int               `json:"count"`
		Requests []json.RawMessage `json:"requests"`
	}
	if err := json.NewDecoder(res.Body).Decode(&dbg); err != nil || dbg.Count != 1 || !strings.Contains(string(dbg.Requests[0]), `"a__b"`) {
		t.Fatalf("debug %+v, %v", dbg, err)
	}
	res, err = http.Get(hs.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if !strings.Contains(string(body), `"id":"tiny"`) {
		t.Fatalf("models %s", body)
	}
}

func TestParseRefusesBadScripts(t *testing.T) {
	for _, src := range []string{
		`rules: [{when: {last: system}, say: x}]`,
		`rules: [{when: {offered: "["}, say: x}]`,
		`rules: [{when: {last: user}}]`,
		`rules: [{say: x, colour: red}]`,
	} {
		if _, err := script.Parse([]byte(src)); err == nil {
			t.Errorf("Parse(%q) accepted it", src)
		}
	}
}
