package rest03

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzRenameMessageParts: it never panics; valid JSON comes out valid (or
// an error); and renaming back restores a document whose messages held
// neither "parts" nor both names.
func FuzzRenameMessageParts(f *testing.F) {
	for _, seed := range []string{
		`{"message":{"messageId":"m","role":"ROLE_USER","content":[{"text":"hi"}]}}`,
		`{"task":{"id":"t","history":[{"messageId":"a","parts":[{"text":"x"}]}],"status":{"message":{"messageId":"b","parts":[]}}}}`,
		`{"statusUpdate":{"status":{"message":{"messageId":"c","content":[{"data":{"data":{"messageId":"d","parts":1}}}]}}}}`,
		`[]`, `"parts"`, `{"parts":{"messageId":null}}`, `not json "parts"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		out, err := renameMessageParts(doc, "content", "parts")
		if err != nil || !json.Valid(doc) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("renamed %q into invalid JSON %q", doc, out)
		}
		var in any
		if json.Unmarshal(doc, &in) != nil || hasBoth(in) {
			return
		}
		back, err := renameMessageParts(out, "parts", "content")
		if err != nil {
			t.Fatalf("renaming back %q: %v", out, err)
		}
		var was, got any
		_ = json.Unmarshal(doc, &was)
		_ = json.Unmarshal(back, &got)
		if hasParts(was) {
			return // a message that had "parts" now has "content": not a round trip
		}
		if !reflect.DeepEqual(was, got) {
			t.Fatalf("round trip of %q gave %q", doc, back)
		}
	})
}

// hasBoth reports whether some message holds both names.
func hasBoth(v any) bool {
	return walkMessages(v, func(m map[string]any) bool { return m["content"] != nil && m["parts"] != nil })
}

// hasParts reports whether some message holds "parts".
func hasParts(v any) bool {
	return walkMessages(v, func(m map[string]any) bool { _, ok := m["parts"]; return ok })
}

func walkMessages(v any, f func(map[string]any) bool) bool {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["messageId"]; ok && f(v) {
			return true
		}
		for _, c := range v {
			if walkMessages(c, f) {
				return true
			}
		}
	case []any:
		for _, c := range v {
			if walkMessages(c, f) {
				return true
			}
		}
	}
	return false
}
