package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"testing"

	"github.com/gowebpki/jcs"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// reference is the slow road the canonical encoder replaces: json.Marshal, then jcs.
func reference(t testing.TB, v any) ([]byte, error) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// canonicalCases are values whose canonical form must match the reference byte for byte.
var canonicalCases = map[string]any{
	"empty":           map[string]any{},
	"nil map":         map[string]any(nil),
	"scalars":         map[string]any{"b": true, "n": nil, "s": "x", "f": 1.5, "i": 3},
	"key order":       map[string]any{"b": 1, "a": 2, "aa": 3, "A": 4, "": 5, "é": 6, "z": 7},
	"utf16 order":     map[string]any{"\U0001F600": 1, "\uFFFD": 2, "\uE000": 3, "\u00e9": 4, "\U00010000": 5},
	"escapes":         map[string]any{"s": "a\"b\\c\b\f\n\r\t\x00\x1f\x7f</script>&\u2028\u2029"},
	"invalid utf8":    map[string]any{"s": "a\xffb\xc0", "k\xfe": "v"},
	"numbers":         []any{0.0, math.Copysign(0, -1), 1e21, 1e-7, 123456789012345680000.0, 0.1, -5e-324, 1.7976931348623157e308, 100.0, 1e20},
	"ints":            []any{int64(1) << 60, int(-42), int64(math.MaxInt64)},
	"json numbers":    []any{json.Number("1.0"), json.Number("-0"), json.Number("1E3"), json.Number("0.000001")},
	"nested":          map[string]any{"a": []any{map[string]any{"z": []any{}, "y": map[string]any{"x": "1"}}}},
	"typed map":       map[string]string{"b": "1", "a": "2"},
	"struct":          struct{ B, A int }{1, 2},
	"float32":         float32(0.1),
	"typed slice":     []int{3, 2, 1},
	"string in slice": []any{"x", nil, false},
}

func TestCanonicalMatchesJCS(t *testing.T) {
	for name, v := range canonicalCases {
		t.Run(name, func(t *testing.T) {
			want, err := reference(t, v)
			if err != nil {
				t.Fatalf("reference: %v", err)
			}
			got, err := appendCanonical(nil, v)
			if err != nil {
				t.Fatalf("appendCanonical: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("canonical form\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestCanonicalRefuses(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	for name, v := range map[string]any{
		"NaN":           math.NaN(),
		"infinity":      []any{math.Inf(-1)},
		"bad number":    json.Number("0x10"),
		"string number": json.Number(`"1"`),
		"huge number":   json.Number("1e400"),
		"cycle":         cyclic,
		"colliding key": map[string]any{"\xff": 1, "\xfe": 2},
		"channel":       map[string]any{"c": make(chan int)},
	} {
		t.Run(name, func(t *testing.T) {
			if out, err := appendCanonical(nil, v); err == nil {
				t.Errorf("accepted as %s", out)
			}
		})
	}
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

// FuzzCanonical decodes any JSON and requires the canonical encoder to agree with the
// reference (json.Marshal, then jcs) on whatever decodes, and to refuse only what the
// reference refuses.
func FuzzCanonical(f *testing.F) {
	for _, v := range canonicalCases {
		raw, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte(`{"a":[1,2.5e10,-0,"\u0000\ud83d\ude00"],"\ud800x":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, useNumber := range []bool{false, true} {
			dec := json.NewDecoder(bytes.NewReader(data))
			if useNumber {
				dec.UseNumber()
			}
			var v any
			if dec.Decode(&v) != nil {
				return
			}
			want, werr := reference(t, v)
			got, gerr := appendCanonical(nil, v)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("reference error %v, canonical error %v, for %q", werr, gerr, data)
			}
			if werr == nil && !bytes.Equal(got, want) {
				t.Fatalf("canonical form of %q\n got %s\nwant %s", data, got, want)
			}
		}
	})
}

func digestOf(b []byte) (string, error) {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
