package jcs

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// writeObject writes m with string values as this package's pieces do.
func writeObject(m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compare)
	buf := []byte{'{'}
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = AppendString(buf, k)
		buf = append(buf, ':')
		buf = AppendString(buf, m[k])
	}
	return append(buf, '}')
}

// viaTransform is the reference: encoding/json's text canonicalised by
// gowebpki/jcs.
func viaTransform(t testing.TB, m map[string]string) []byte {
	t.Helper()
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		t.Fatalf("transform %s: %v", raw, err)
	}
	return out
}

// seeds cover escapes, the UTF-16 order (U+E000..U+FFFF against surrogate
// pairs, two pairs sharing a high surrogate) and prefixes.
var seeds = [][3]string{
	{"b", "a", "aa"},
	{"\ufb33", "😀", "\ue000"},
	{"\U0001F600", "\U0001F601", "\U0001F000"},
	{"\"\\/\b\f\n\r\t", "\u0001\u001f\u007f", "\u2028<>&é"},
	{"", "a\u0000", "A"},
	{"\uffff", "\U00010000", "\U0010FFFF"},
}

func TestObjectMatchesTransform(t *testing.T) {
	for _, s := range seeds {
		m := map[string]string{s[0]: s[1], s[1]: s[2], s[2]: s[0]}
		got, want := writeObject(m), viaTransform(t, m)
		if !bytes.Equal(got, want) {
			t.Errorf("%q:\n got %s\nwant %s", s, got, want)
		}
	}
}

func TestCompareSigns(t *testing.T) {
	tests := []struct {
		a, b string
		want int // sign
	}{
		{"a", "b", -1},
		{"b", "a", 1},
		{"a", "a", 0},
		{"a", "ab", -1},
		{"\uffff", "😀", 1}, // U+FFFF > 0xD83D
		{"\ue000", "😀", 1},
		{"\ud7ff", "😀", -1},
		{"\U0001F600", "\U0001F601", -1},
		{"\U0001F600", "\U00010000", 1},
	}
	for _, tt := range tests {
		got := compare(tt.a, tt.b)
		if (got > 0) != (tt.want > 0) || (got < 0) != (tt.want < 0) {
			t.Errorf("compare(%q, %q) = %d, want sign %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestValidUTF8(t *testing.T) {
	tests := map[string]string{
		"valid":     "héllo 😀",
		"lone byte": "a\xffb",
		"truncated": "a\xe2\x82",
		"surrogate": "\xed\xa0\x80",
		"empty":     "",
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			checkValidUTF8(t, in)
		})
	}
}

// checkValidUTF8 checks that ValidUTF8 gives what encoding/json sends.
func checkValidUTF8(t *testing.T, in string) {
	t.Helper()
	got := ValidUTF8(in)
	if !utf8.ValidString(got) {
		t.Fatalf("ValidUTF8(%q) = %q, not valid UTF-8", in, got)
	}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var want string
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatalf("unmarshal %s: %v", raw, err)
	}
	if got != want {
		t.Fatalf("ValidUTF8(%q) = %q, encoding/json sends %q", in, got, want)
	}
}

// FuzzObject checks the quoting and the member order against gowebpki/jcs on
// any three strings, and the UTF-8 repair against encoding/json.
func FuzzObject(f *testing.F) {
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2])
	}
	f.Add("a\xffb", "\xed\xa0\x80", "ok")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		for _, s := range []string{a, b, c} {
			checkValidUTF8(t, s)
		}
		a, b, c = ValidUTF8(a), ValidUTF8(b), ValidUTF8(c)
		m := map[string]string{a: b, b: c, c: a}
		got, want := writeObject(m), viaTransform(t, m)
		if !bytes.Equal(got, want) {
			t.Fatalf("%q %q %q:\n got %s\nwant %s", a, b, c, got, want)
		}
	})
}
