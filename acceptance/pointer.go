package acceptance

import (
	"fmt"
	"strconv"
	"strings"
)

// A pointer is a parsed RFC 6901 JSON pointer. It is parsed at load so that a malformed one is a
// contract error rather than evidence that is never found.
type pointer struct {
	text   string
	tokens []string
}

func parsePointer(s string) (pointer, error) {
	if s == "" {
		return pointer{}, nil // the whole document
	}
	if !strings.HasPrefix(s, "/") {
		return pointer{}, fmt.Errorf("JSON pointer %q must be empty or start with /", s)
	}
	parts := strings.Split(s[1:], "/")
	for i, part := range parts {
		for j := 0; j < len(part); j++ {
			if part[j] == '~' && (j+1 == len(part) || (part[j+1] != '0' && part[j+1] != '1')) {
				return pointer{}, fmt.Errorf("JSON pointer %q: ~ must be followed by 0 or 1", s)
			}
		}
		// ~1 first: decoding ~0 first would turn "~01" into "/" instead of "~1".
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
	}
	return pointer{text: s, tokens: parts}, nil
}

// get returns the value the pointer names in v, a decoded JSON document, and whether it exists.
func (p pointer) get(v any) (any, bool) {
	for _, tok := range p.tokens {
		switch node := v.(type) {
		case map[string]any:
			next, ok := node[tok]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			// RFC 6901: an index is 0 or digits without a leading zero.
			if tok == "" || (len(tok) > 1 && tok[0] == '0') || strings.TrimLeft(tok, "0123456789") != "" {
				return nil, false
			}
			i, err := strconv.Atoi(tok)
			if err != nil || i >= len(node) {
				return nil, false
			}
			v = node[i]
		default:
			return nil, false
		}
	}
	return v, true
}
