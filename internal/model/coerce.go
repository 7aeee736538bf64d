package model

import (
	"encoding/json"
	"math"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Coerce fixes obvious type drift in v (a decoded JSON value) against rs, and nothing else: a
// numeric string where only an integer or a number is allowed ("3" → 3), "true" or "false"
// where only a boolean is, and a scalar where only an array is (x → [x]). It follows
// properties and items only, never anyOf, oneOf, allOf or $ref. A value that already
// validates is returned unchanged, and Coerce(Coerce(v)) equals Coerce(v).
func Coerce(rs *jsonschema.Resolved, v any) any {
	if rs.Validate(v) == nil {
		return v
	}
	return coerce(rs.Schema(), v)
}

// coerce applies the rules at one schema node and recurses into properties and items. It
// copies what it descends into, so the caller's value stays as it was.
func coerce(s *jsonschema.Schema, v any) any {
	if s == nil {
		return v
	}
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	if len(types) > 0 && !hasType(types, v) {
		v = drift(types, v)
	}
	switch x := v.(type) {
	case map[string]any:
		if len(s.Properties) == 0 {
			return v
		}
		m := make(map[string]any, len(x))
		for k, pv := range x {
			m[k] = coerce(s.Properties[k], pv)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			switch {
			case i < len(s.PrefixItems):
				a[i] = coerce(s.PrefixItems[i], e)
			case len(s.ItemsArray) > 0: // draft 7 tuple form; additionalItems is not followed
				if i < len(s.ItemsArray) {
					a[i] = coerce(s.ItemsArray[i], e)
				} else {
					a[i] = e
				}
			default: // items applies after prefixItems
				a[i] = coerce(s.Items, e)
			}
		}
		return a
	}
	return v
}

// drift converts v, whose JSON type types do not allow, when the conversion is obvious.
func drift(types []string, v any) any {
	if str, ok := v.(string); ok {
		if slices.Contains(types, "integer") || slices.Contains(types, "number") {
			if f, ok := number(str); ok && (slices.Contains(types, "number") || f == math.Trunc(f)) {
				return f
			}
		}
		if slices.Contains(types, "boolean") && (str == "true" || str == "false") {
			return str == "true"
		}
	}
	if slices.Contains(types, "array") {
		switch v.(type) {
		case string, float64, bool:
			return []any{v}
		}
	}
	return v
}

// number parses str when it is exactly a JSON number (no spaces, no NaN or Inf, in range).
func number(str string) (float64, bool) {
	if str == "" || strings.TrimSpace(str) != str || !(str[0] == '-' || str[0] >= '0' && str[0] <= '9') {
		return 0, false
	}
	var f float64
	if err := json.Unmarshal([]byte(str), &f); err != nil {
		return 0, false
	}
	return f, true
}

// hasType reports whether v's JSON type is one of types.
func hasType(types []string, v any) bool {
	for _, t := range types {
		switch t {
		case "null":
			if v == nil {
				return true
			}
		case "boolean":
			if _, ok := v.(bool); ok {
				return true
			}
		case "string":
			if _, ok := v.(string); ok {
				return true
			}
		case "number":
			if _, ok := v.(float64); ok {
				return true
			}
		case "integer":
			if f, ok := v.(float64); ok && f == math.Trunc(f) && !math.IsInf(f, 0) {
				return true
			}
		case "object":
			if _, ok := v.(map[string]any); ok {
				return true
			}
		case "array":
			if _, ok := v.([]any); ok {
				return true
			}
		}
	}
	return false
}
