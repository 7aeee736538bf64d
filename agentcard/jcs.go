package agentcard

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// jcsWriter writes a decoded JSON tree (what encoding/json decodes into any,
// numbers as json.Number) in its RFC 8785 form, dropping empty values on the
// way (step 4 of the rule in [CanonicalPayload]).
//
// It exists because the JCS libraries for Go (gowebpki/jcs, cyberphone's
// json-canonicalization) only transform JSON text: going through them meant
// encoding the tree and parsing it again, half the cost of a verification.
// Numbers still go through jcs.NumberToJSON, the library's ES6 formatter.
type jcsWriter struct {
	buf []byte
}

// value appends v and reports whether it wrote anything: an empty value
// (null, "", [] or {}, also after dropping the empty values inside it)
// leaves buf as it was.
func (w *jcsWriter) value(v any) (bool, error) {
	switch v := v.(type) {
	case nil:
		return false, nil
	case string:
		if v == "" {
			return false, nil
		}
		return true, w.string(v)
	case bool:
		w.buf = strconv.AppendBool(w.buf, v)
		return true, nil
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return false, fmt.Errorf("number %.40q: %w", v, err)
		}
		s, err := jcs.NumberToJSON(f)
		if err != nil {
			return false, fmt.Errorf("number %.40q: %w", v, err)
		}
		w.buf = append(w.buf, s...)
		return true, nil
	case []any:
		return w.array(v)
	case map[string]any:
		return w.object(v)
	default:
		return false, fmt.Errorf("unexpected %T in a decoded card", v)
	}
}

func (w *jcsWriter) array(v []any) (bool, error) {
	start := len(w.buf)
	w.buf = append(w.buf, '[')
	n := 0
	for _, e := range v {
		mark := len(w.buf)
		if n > 0 {
			w.buf = append(w.buf, ',')
		}
		wrote, err := w.value(e)
		if err != nil {
			return false, err
		}
		if !wrote {
			w.buf = w.buf[:mark]
			continue
		}
		n++
	}
	if n == 0 {
		w.buf = w.buf[:start]
		return false, nil
	}
	w.buf = append(w.buf, ']')
	return true, nil
}

func (w *jcsWriter) object(v map[string]any) (bool, error) {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareUTF16)
	start := len(w.buf)
	w.buf = append(w.buf, '{')
	n := 0
	for _, k := range keys {
		mark := len(w.buf)
		if n > 0 {
			w.buf = append(w.buf, ',')
		}
		if err := w.string(k); err != nil {
			return false, err
		}
		w.buf = append(w.buf, ':')
		wrote, err := w.value(v[k])
		if err != nil {
			return false, err
		}
		if !wrote {
			w.buf = w.buf[:mark]
			continue
		}
		n++
	}
	if n == 0 {
		w.buf = w.buf[:start]
		return false, nil
	}
	w.buf = append(w.buf, '}')
	return true, nil
}

// string appends s quoted as RFC 8785 section 3.2.2.2 says: only '"', '\'
// and the control characters are escaped, the usual five with their short
// forms, the rest as \u00xx in lower case; everything else is written as is.
func (w *jcsWriter) string(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("string is not valid UTF-8")
	}
	w.buf = append(w.buf, '"')
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		w.buf = append(w.buf, s[last:i]...)
		last = i + 1
		switch c {
		case '"', '\\':
			w.buf = append(w.buf, '\\', c)
		case '\b':
			w.buf = append(w.buf, '\\', 'b')
		case '\t':
			w.buf = append(w.buf, '\\', 't')
		case '\n':
			w.buf = append(w.buf, '\\', 'n')
		case '\f':
			w.buf = append(w.buf, '\\', 'f')
		case '\r':
			w.buf = append(w.buf, '\\', 'r')
		default:
			const hex = "0123456789abcdef"
			w.buf = append(w.buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	w.buf = append(w.buf, s[last:]...)
	w.buf = append(w.buf, '"')
	return nil
}

// compareUTF16 orders strings by their UTF-16 code units, as JCS sorts
// member names. It differs from byte (code point) order only where a
// character above U+FFFF, written with a surrogate (U+D800..U+DFFF), meets
// one in U+E000..U+FFFF.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			ua, ub := firstUnit(ra), firstUnit(rb)
			if ua != ub {
				return int(ua) - int(ub)
			}
			return int(ra) - int(rb) // same high surrogate: the low ones keep code point order
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// firstUnit is the first UTF-16 code unit of r.
func firstUnit(r rune) rune {
	if r < 0x10000 {
		return r
	}
	return 0xd800 + (r-0x10000)>>10
}
