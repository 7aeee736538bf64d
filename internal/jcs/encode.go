package jcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	gojcs "github.com/gowebpki/jcs"
)

// maxDepth bounds nesting as encoding/json's decoder does, and stops a map
// that contains itself.
const maxDepth = 10_000

var errTooDeep = fmt.Errorf("nested deeper than %d levels", maxDepth)

// Append appends the RFC 8785 form of v to dst: the bytes of
// gowebpki/jcs's Transform(json.Marshal(v)). Decoded JSON (maps, slices,
// strings, bools, nil, float64, json.Number) and ints are written directly;
// any other value takes the encoding/json round trip once, so that it is
// written as encoding/json would send it. Invalid UTF-8 is repaired as
// encoding/json repairs it.
func Append(dst []byte, v any) ([]byte, error) {
	e := encoder{buf: dst}
	_, _, _, err := e.value(v)
	return e.buf, err
}

// AppendCopies appends v as [Append] does and returns the two decoded forms
// of what it wrote, built on the way instead of by decoding it: sent, with
// numbers as json.Number holding their canonical text, and plain, with
// numbers as float64 (what encoding/json decodes into any). Subtrees without
// numbers are shared by both.
func AppendCopies(dst []byte, v any) (out []byte, sent, plain any, err error) {
	e := encoder{buf: dst, copies: true}
	sent, plain, _, err = e.value(v)
	return e.buf, sent, plain, err
}

// AppendPruned appends the RFC 8785 form of tree after dropping, recursively,
// every null, empty string, empty list and empty object, and then every list
// or object that became empty, as the A2A SDKs do before they sign a card.
// It appends nothing when nothing is left. tree must be decoded JSON with
// numbers as json.Number (a decoder with UseNumber): a signed payload must
// not depend on how Go values are encoded, so a float64, an int, any other
// Go type and invalid UTF-8 (which JSON text cannot carry) are refused.
func AppendPruned(dst []byte, tree any) ([]byte, error) {
	e := encoder{buf: dst, prune: true}
	_, _, _, err := e.value(tree)
	return e.buf, err
}

// encoder writes canonical JSON to buf in one pass over a decoded value.
type encoder struct {
	buf []byte
	// copies builds the decoded forms AppendCopies returns.
	copies bool
	// prune is AppendPruned's mode: empty values are left out (an empty
	// value leaves buf as it was) and only decoded JSON is taken.
	prune bool
	depth int
}

// value appends v's canonical form. same reports that plain is sent (no
// number inside), so that a caller can share the subtree instead of copying
// it.
func (e *encoder) value(v any) (sent, plain any, same bool, err error) {
	switch v := v.(type) {
	case nil:
		if !e.prune {
			e.buf = append(e.buf, "null"...)
		}
		return nil, nil, true, nil
	case bool:
		e.buf = strconv.AppendBool(e.buf, v)
		return v, v, true, nil
	case string:
		if e.prune {
			if !utf8.ValidString(v) {
				return nil, nil, false, errors.New("string is not valid UTF-8")
			}
			if v == "" {
				return nil, nil, true, nil
			}
		}
		s := ValidUTF8(v)
		e.buf = AppendString(e.buf, s)
		if !e.copies {
			return nil, nil, true, nil // boxing s would cost an allocation for nothing
		}
		return s, s, true, nil
	case json.Number:
		if !isJSONNumber(v) {
			return nil, nil, false, fmt.Errorf("invalid number literal %.40q", string(v))
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return nil, nil, false, fmt.Errorf("number %.40q: %w", v, err)
		}
		return e.number(f)
	case map[string]any:
		return e.object(v)
	case []any:
		return e.array(v)
	}
	if e.prune {
		return nil, nil, false, fmt.Errorf("unexpected %T in a decoded tree", v)
	}
	switch v := v.(type) {
	case float64:
		return e.number(v)
	case int:
		return e.number(float64(v)) // what JCS makes of the decimal text json.Marshal writes
	case int64:
		return e.number(float64(v))
	}
	return e.roundTrip(v)
}

// number appends f in ECMAScript's form, by gowebpki/jcs's formatter.
func (e *encoder) number(f float64) (any, any, bool, error) {
	text, err := gojcs.NumberToJSON(f)
	if err != nil {
		return nil, nil, false, fmt.Errorf("number %v is not JSON: %w", f, err)
	}
	e.buf = append(e.buf, text...)
	if !e.copies {
		return nil, nil, false, nil
	}
	return json.Number(text), f, false, nil
}

func (e *encoder) object(m map[string]any) (any, any, bool, error) {
	if m == nil && !e.prune { // as encoding/json sends it
		e.buf = append(e.buf, "null"...)
		return nil, nil, true, nil
	}
	if e.depth++; e.depth > maxDepth {
		return nil, nil, false, errTooDeep
	}
	defer func() { e.depth-- }()
	keys := make([]string, 0, len(m))
	fixed := false // a key held invalid UTF-8, which JSON cannot carry
	for k := range m {
		if !utf8.ValidString(k) {
			if e.prune {
				return nil, nil, false, fmt.Errorf("member name %q is not valid UTF-8", k)
			}
			fixed = true
		}
		keys = append(keys, k)
	}
	var originals map[string]string
	if fixed { // json.Marshal would send the repaired key; two repairs may collide
		originals = make(map[string]string, len(keys))
		for i, k := range keys {
			keys[i] = ValidUTF8(k)
			if _, dup := originals[keys[i]]; dup {
				return nil, nil, false, fmt.Errorf("duplicate key %q after replacing invalid UTF-8", keys[i])
			}
			originals[keys[i]] = k
		}
	}
	slices.SortFunc(keys, compare)
	var sent, plain map[string]any
	if e.copies {
		sent = make(map[string]any, len(m))
	}
	start := len(e.buf)
	e.buf = append(e.buf, '{')
	n := 0 // members written
	for i, k := range keys {
		mark := len(e.buf)
		if n > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = AppendString(e.buf, k)
		e.buf = append(e.buf, ':')
		orig := k
		if fixed {
			orig = originals[k]
		}
		valueAt := len(e.buf)
		s, p, same, err := e.value(m[orig])
		if err != nil {
			return nil, nil, false, err
		}
		if e.prune && len(e.buf) == valueAt { // an empty value: the member goes too
			e.buf = e.buf[:mark]
			continue
		}
		n++
		if !e.copies {
			continue
		}
		sent[k] = s
		if !same && plain == nil { // the first number: plain parts from sent from here on
			plain = make(map[string]any, len(m))
			for _, done := range keys[:i] {
				plain[done] = sent[done]
			}
		}
		if plain != nil {
			plain[k] = p
		}
	}
	if e.prune && n == 0 {
		e.buf = e.buf[:start]
		return nil, nil, true, nil
	}
	e.buf = append(e.buf, '}')
	if plain == nil {
		return sent, sent, true, nil
	}
	return sent, plain, false, nil
}

func (e *encoder) array(a []any) (any, any, bool, error) {
	if a == nil && !e.prune {
		e.buf = append(e.buf, "null"...)
		return nil, nil, true, nil
	}
	if e.depth++; e.depth > maxDepth {
		return nil, nil, false, errTooDeep
	}
	defer func() { e.depth-- }()
	var sent, plain []any
	if e.copies {
		sent = make([]any, len(a))
	}
	start := len(e.buf)
	e.buf = append(e.buf, '[')
	n := 0 // elements written
	for i, v := range a {
		mark := len(e.buf)
		if n > 0 {
			e.buf = append(e.buf, ',')
		}
		valueAt := len(e.buf)
		s, p, same, err := e.value(v)
		if err != nil {
			return nil, nil, false, err
		}
		if e.prune && len(e.buf) == valueAt {
			e.buf = e.buf[:mark]
			continue
		}
		n++
		if !e.copies {
			continue
		}
		sent[i] = s
		if !same && plain == nil {
			plain = make([]any, len(a))
			copy(plain, sent[:i])
		}
		if plain != nil {
			plain[i] = p
		}
	}
	if e.prune && n == 0 {
		e.buf = e.buf[:start]
		return nil, nil, true, nil
	}
	e.buf = append(e.buf, ']')
	if plain == nil {
		return sent, sent, true, nil
	}
	return sent, plain, false, nil
}

// roundTrip writes a value that is not plain decoded JSON as encoding/json
// would send it: it canonicalises what that text decodes to.
func (e *encoder) roundTrip(v any) (any, any, bool, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, nil, false, fmt.Errorf("encode %T: %w", v, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, nil, false, fmt.Errorf("decode %T: %w", v, err)
	}
	return e.value(generic)
}

// isJSONNumber reports whether n is a JSON number literal, which json.Number
// does not check.
func isJSONNumber(n json.Number) bool {
	s := string(n)
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return false
	}
	return json.Valid([]byte(s))
}
