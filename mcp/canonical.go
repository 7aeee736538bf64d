package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	gojcs "github.com/gowebpki/jcs"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/handoff-a2a/handoff/internal/jcs"
)

// The canonical encoder writes RFC 8785 (JCS) JSON straight from decoded JSON values: the
// bytes are those of gowebpki/jcs's Transform(json.Marshal(v)), without the marshal, the parse and the
// decode back that the round trip costs on every call. Values that are not plain decoded
// JSON (structs, typed maps and slices, other number types) take that round trip once, so
// that they are encoded exactly as encoding/json would send them.

// maxCanonicalDepth bounds nesting as encoding/json's decoder does, and stops a map that
// contains itself.
const maxCanonicalDepth = 10_000

var errTooDeep = fmt.Errorf("nested deeper than %d levels", maxCanonicalDepth)

// canonicaliser appends canonical JSON to buf and, when copies is set, builds the value's
// two decoded forms on the way: sent, with numbers as json.Number holding their canonical
// text, and plain, with numbers as float64.
type canonicaliser struct {
	buf    []byte
	copies bool
	depth  int
}

// value appends v's canonical form. same reports that plain is sent (no number inside), so
// a caller can share the subtree instead of copying it.
func (c *canonicaliser) value(v any) (sent, plain any, same bool, err error) {
	switch v := v.(type) {
	case nil:
		c.buf = append(c.buf, "null"...)
		return nil, nil, true, nil
	case bool:
		c.buf = strconv.AppendBool(c.buf, v)
		return v, v, true, nil
	case string:
		s := jcs.ValidUTF8(v)
		c.buf = jcs.AppendString(c.buf, s)
		return s, s, true, nil
	case float64:
		return c.number(v)
	case int:
		return c.number(float64(v)) // what JCS makes of the decimal text json.Marshal writes
	case int64:
		return c.number(float64(v))
	case json.Number:
		if !isJSONNumber(v) {
			return nil, nil, false, fmt.Errorf("invalid number literal %q", string(v))
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return nil, nil, false, fmt.Errorf("number %s: %w", v, err)
		}
		return c.number(f)
	case map[string]any:
		return c.object(v)
	case []any:
		return c.array(v)
	default:
		return c.roundTrip(v)
	}
}

func (c *canonicaliser) number(f float64) (any, any, bool, error) {
	text, err := gojcs.NumberToJSON(f)
	if err != nil {
		return nil, nil, false, fmt.Errorf("number %v is not JSON", f)
	}
	c.buf = append(c.buf, text...)
	return json.Number(text), f, false, nil
}

func (c *canonicaliser) object(m map[string]any) (any, any, bool, error) {
	if m == nil { // as encoding/json sends it
		c.buf = append(c.buf, "null"...)
		return nil, nil, true, nil
	}
	if c.depth++; c.depth > maxCanonicalDepth {
		return nil, nil, false, errTooDeep
	}
	defer func() { c.depth-- }()
	keys := make([]string, 0, len(m))
	fixed := false // a key held invalid UTF-8, which JSON cannot carry
	for k := range m {
		if !utf8.ValidString(k) {
			fixed = true
		}
		keys = append(keys, k)
	}
	var originals map[string]string
	if fixed { // json.Marshal would send the repaired key; two repairs may collide
		originals = make(map[string]string, len(keys))
		for i, k := range keys {
			keys[i] = jcs.ValidUTF8(k)
			if _, dup := originals[keys[i]]; dup {
				return nil, nil, false, fmt.Errorf("duplicate key %q after replacing invalid UTF-8", keys[i])
			}
			originals[keys[i]] = k
		}
	}
	slices.SortFunc(keys, jcs.Compare)
	var sent, plain map[string]any
	if c.copies {
		sent = make(map[string]any, len(m))
	}
	c.buf = append(c.buf, '{')
	for i, k := range keys {
		if i > 0 {
			c.buf = append(c.buf, ',')
		}
		c.buf = jcs.AppendString(c.buf, k)
		c.buf = append(c.buf, ':')
		orig := k
		if fixed {
			orig = originals[k]
		}
		s, p, same, err := c.value(m[orig])
		if err != nil {
			return nil, nil, false, err
		}
		if !c.copies {
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
	c.buf = append(c.buf, '}')
	if plain == nil {
		return sent, sent, true, nil
	}
	return sent, plain, false, nil
}

func (c *canonicaliser) array(a []any) (any, any, bool, error) {
	if a == nil {
		c.buf = append(c.buf, "null"...)
		return nil, nil, true, nil
	}
	if c.depth++; c.depth > maxCanonicalDepth {
		return nil, nil, false, errTooDeep
	}
	defer func() { c.depth-- }()
	var sent, plain []any
	if c.copies {
		sent = make([]any, len(a))
	}
	c.buf = append(c.buf, '[')
	for i, e := range a {
		if i > 0 {
			c.buf = append(c.buf, ',')
		}
		s, p, same, err := c.value(e)
		if err != nil {
			return nil, nil, false, err
		}
		if !c.copies {
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
	c.buf = append(c.buf, ']')
	if plain == nil {
		return sent, sent, true, nil
	}
	return sent, plain, false, nil
}

// roundTrip encodes a value that is not plain decoded JSON as encoding/json would send it,
// then canonicalises what that decodes to.
func (c *canonicaliser) roundTrip(v any) (any, any, bool, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, nil, false, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, nil, false, err
	}
	return c.value(generic)
}

// appendCanonical appends the canonical JSON of v to dst.
func appendCanonical(dst []byte, v any) ([]byte, error) {
	c := canonicaliser{buf: dst}
	_, _, _, err := c.value(v)
	return c.buf, err
}

// appendCanonicalContent appends the canonical JSON of a tool's content list. Text blocks,
// the common case, are written directly; other blocks take the encoding/json round trip.
func appendCanonicalContent(dst []byte, content []mcpsdk.Content) ([]byte, error) {
	if content == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	for i, block := range content {
		if i > 0 {
			dst = append(dst, ',')
		}
		if t, ok := block.(*mcpsdk.TextContent); ok && t.Meta == nil && t.Annotations == nil {
			dst = append(dst, `{"text":`...)
			dst = jcs.AppendString(dst, jcs.ValidUTF8(t.Text))
			dst = append(dst, `,"type":"text"}`...)
			continue
		}
		c := canonicaliser{buf: dst}
		if _, _, _, err := c.roundTrip(block); err != nil {
			return nil, err
		}
		dst = c.buf
	}
	return append(dst, ']'), nil
}

// isJSONNumber reports whether n is a JSON number literal, which json.Number does not check.
func isJSONNumber(n json.Number) bool {
	s := string(n)
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return false
	}
	return json.Valid([]byte(s))
}
