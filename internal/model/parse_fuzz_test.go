package model

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/openai/openai-go/v3"
)

// FuzzParseResponse feeds arbitrary response bodies through the reply parser and every tool
// call's arguments through the loop's parse-coerce-validate step. Neither may panic; a reply
// has unique, non-empty call ids; accepted arguments validate and re-encode unchanged.
func FuzzParseResponse(f *testing.F) {
	for _, seed := range []string{
		`{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`,
		`{"choices":[{"message":{"tool_calls":[{"id":"a","type":"function","function":{"name":"notes__add","arguments":"{\"text\":\"x\",\"count\":\"3\"}"}},{"id":"a","type":"function","function":{"name":"n","arguments":"{"}}]}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"type":"function","function":{"name":"notes__add","arguments":""}}]}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"id":"c","type":"custom","custom":{"name":"x","input":"raw"}}]}}]}`,
		`{"choices":[]}`, `{}`, `null`, `[]`, `{"choices":[{"message":{"refusal":"no"}}]}`,
	} {
		f.Add([]byte(seed))
	}
	rs, err := resolveSchema(json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"count":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},"required":["text"]}`))
	if err != nil {
		f.Fatal(err)
	}
	l := &Loop{}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := parseBody(body)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, tc := range r.ToolCalls {
			if tc.ID == "" || seen[tc.ID] {
				t.Fatalf("call id %q is empty or repeated in %s", tc.ID, body)
			}
			seen[tc.ID] = true
			args, msg := l.arguments(rs, tc.Arguments)
			if msg != "" {
				continue
			}
			var v any
			if err := json.Unmarshal(args, &v); err != nil {
				t.Fatalf("accepted arguments %s do not decode: %v", args, err)
			}
			if err := rs.Validate(v); err != nil {
				t.Fatalf("accepted arguments %s do not validate: %v", args, err)
			}
			again, msg := l.arguments(rs, string(args))
			if msg != "" || string(again) != string(args) {
				t.Fatalf("accepted arguments %s changed on a second pass: %s %s", args, again, msg)
			}
		}
	})
}

// parseBody decodes a Chat Completions response body as [Client.Complete] reads it: the
// library's decoding, then parseReply.
func parseBody(body []byte) (Reply, error) {
	var res openai.ChatCompletion
	if err := json.Unmarshal(body, &res); err != nil {
		return Reply{}, fmt.Errorf("decode chat completion: %w", err)
	}
	return parseReply(&res)
}
