package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// reference is what internal/jcs.Append is held to: json.Marshal, then gowebpki/jcs.
func reference(t testing.TB, v any) ([]byte, error) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// TestCanonicaliseForms checks the two decoded forms: sent keeps the canonical number text,
// plain holds float64, and both are the decoding of the digested text.
func TestCanonicaliseForms(t *testing.T) {
	in := map[string]any{"n": 1e21, "s": "a\xff", "deep": []any{map[string]any{"k": 7}, "t"}, "flat": []any{"x"}}
	args, plain, digest, err := canonicalise("srv__tool", in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := reference(t, map[string]any{"arguments": in, "tool": "srv__tool"})
	if err != nil {
		t.Fatal(err)
	}
	var wantSent struct{ Arguments map[string]any }
	dec := json.NewDecoder(bytes.NewReader(want))
	dec.UseNumber()
	if err := dec.Decode(&wantSent); err != nil {
		t.Fatal(err)
	}
	var wantPlain struct{ Arguments any }
	if err := json.Unmarshal(want, &wantPlain); err != nil {
		t.Fatal(err)
	}
	same := func(a, b any) bool {
		x, _ := json.Marshal(a)
		y, _ := json.Marshal(b)
		return bytes.Equal(x, y)
	}
	if !same(args, wantSent.Arguments) || args["n"] != json.Number("1e+21") {
		t.Errorf("sent form %#v, want %#v", args, wantSent.Arguments)
	}
	if !same(plain, wantPlain.Arguments) || plain.(map[string]any)["n"] != 1e21 {
		t.Errorf("plain form %#v, want %#v", plain, wantPlain.Arguments)
	}
	if d, _ := digestOf(want); d != digest {
		t.Errorf("digest %s, want %s", digest, d)
	}
}

func TestResultHashMatchesJCS(t *testing.T) {
	for name, r := range map[string]Result{
		"text":      {Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "hi\n\"there\""}}, StructuredContent: map[string]any{"b": 1.0, "a": "x"}},
		"no output": {},
		"annotated": {Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "t", Meta: mcpsdk.Meta{"z": 1, "a": 2}},
			&mcpsdk.ImageContent{Data: []byte{1, 2, 3}, MIMEType: "image/png"}}},
		"empty list": {Content: []mcpsdk.Content{}},
	} {
		t.Run(name, func(t *testing.T) {
			want, err := reference(t, struct {
				Content           any `json:"content"`
				StructuredContent any `json:"structuredContent"`
			}{r.Content, r.StructuredContent})
			if err != nil {
				t.Fatal(err)
			}
			d, _ := digestOf(want)
			if got := resultHash(r); got != d {
				t.Errorf("resultHash %s, want %s (of %s)", got, d, want)
			}
		})
	}
}

func digestOf(b []byte) (string, error) {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
