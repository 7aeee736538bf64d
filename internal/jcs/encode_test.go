package jcs

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/gowebpki/jcs"
)

// reference is the slow road Append replaces: json.Marshal, then gowebpki/jcs.
func reference(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// appendCases are values whose canonical form must match the reference byte for byte.
var appendCases = map[string]any{
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

func TestAppendMatchesTransform(t *testing.T) {
	for name, v := range appendCases {
		t.Run(name, func(t *testing.T) {
			want, err := reference(v)
			if err != nil {
				t.Fatalf("reference: %v", err)
			}
			got, err := Append(nil, v)
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("canonical form\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestAppendRefuses(t *testing.T) {
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
			if out, err := Append(nil, v); err == nil {
				t.Errorf("accepted as %s", out)
			}
		})
	}
}

// TestAppendCopies checks the two decoded forms against the decoding of the
// reference's text: sent with numbers as json.Number, plain as float64.
func TestAppendCopies(t *testing.T) {
	for name, v := range appendCases {
		t.Run(name, func(t *testing.T) {
			want, err := reference(v)
			if err != nil {
				t.Fatalf("reference: %v", err)
			}
			got, sent, plain, err := AppendCopies(nil, v)
			if err != nil {
				t.Fatalf("AppendCopies: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("canonical form\n got %s\nwant %s", got, want)
			}
			checkCopies(t, want, sent, plain)
		})
	}
}

// checkCopies requires sent and plain to be what text decodes to, with
// UseNumber and without, and sent's numbers to hold their canonical text.
func checkCopies(t *testing.T, text []byte, sent, plain any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var wantSent, wantPlain any
	if err := dec.Decode(&wantSent); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(text, &wantPlain); err != nil {
		t.Fatal(err)
	}
	if !sameTree(sent, wantSent) {
		t.Errorf("sent form %#v, want %#v", sent, wantSent)
	}
	if !sameTree(plain, wantPlain) {
		t.Errorf("plain form %#v, want %#v", plain, wantPlain)
	}
}

// sameTree compares two decoded values exactly, json.Number by its text.
func sameTree(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			if w, ok := b[k]; !ok || !sameTree(v, w) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameTree(a[i], b[i]) {
				return false
			}
		}
		return true
	case float64:
		b, ok := b.(float64)
		return ok && (a == b || (a != a && b != b))
	}
	return a == b
}

// FuzzAppend decodes any JSON and requires Append to agree with the
// reference (json.Marshal, then gowebpki/jcs) on whatever decodes, and to
// refuse only what the reference refuses; AppendCopies writes the same and
// returns the decoding of it.
func FuzzAppend(f *testing.F) {
	for _, v := range appendCases {
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
			want, werr := reference(v)
			got, gerr := Append(nil, v)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("reference error %v, canonical error %v, for %q", werr, gerr, data)
			}
			if werr != nil {
				continue
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("canonical form of %q\n got %s\nwant %s", data, got, want)
			}
			copied, sent, plain, err := AppendCopies(nil, v)
			if err != nil || !bytes.Equal(copied, want) {
				t.Fatalf("AppendCopies of %q: %s, %v; want %s", data, copied, err, want)
			}
			checkCopies(t, want, sent, plain)
		}
	})
}
