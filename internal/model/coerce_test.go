package model_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/handoff-a2a/handoff/internal/model"
)

func resolve(t testing.TB, schema string) *jsonschema.Resolved {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func decode(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// coerceCases seed FuzzCoerce too.
var coerceCases = []struct {
	name, schema, in, want string
}{
	{"string to integer", `{"type":"object","properties":{"n":{"type":"integer"}}}`, `{"n":"3"}`, `{"n":3}`},
	{"string to number", `{"type":"object","properties":{"n":{"type":"number"}}}`, `{"n":"-2.5e1"}`, `{"n":-25}`},
	{"fraction is no integer", `{"type":"object","properties":{"n":{"type":"integer"}}}`, `{"n":"3.5"}`, `{"n":"3.5"}`},
	{"string to bool", `{"type":"object","properties":{"b":{"type":"boolean"}}}`, `{"b":"false"}`, `{"b":false}`},
	{"True is no bool", `{"type":"object","properties":{"b":{"type":"boolean"}}}`, `{"b":"True"}`, `{"b":"True"}`},
	{"scalar to array", `{"type":"object","properties":{"tags":{"type":"array","items":{"type":"integer"}}}}`, `{"tags":"7"}`, `{"tags":[7]}`},
	{"array items", `{"type":"array","items":{"type":"integer"}}`, `["1",2,"x"]`, `[1,2,"x"]`},
	{"prefix items", `{"type":"array","prefixItems":[{"type":"boolean"}],"items":{"type":"number"}}`, `["true","2"]`, `[true,2]`},
	{"string allowed stays", `{"type":"object","properties":{"n":{"type":["string","integer"]}}}`, `{"n":"3"}`, `{"n":"3"}`},
	{"spaces are not numbers", `{"type":"object","properties":{"n":{"type":"integer"}}}`, `{"n":" 3"}`, `{"n":" 3"}`},
	{"NaN is no number", `{"type":"object","properties":{"n":{"type":"number"}}}`, `{"n":"NaN"}`, `{"n":"NaN"}`},
	{"object is not wrapped", `{"type":"object","properties":{"a":{"type":"array"}}}`, `{"a":{"x":1}}`, `{"a":{"x":1}}`},
	{"anyOf is not followed", `{"anyOf":[{"type":"object","properties":{"n":{"type":"integer"}}}]}`, `{"n":"3"}`, `{"n":"3"}`},
	{"nested", `{"type":"object","properties":{"o":{"type":"object","properties":{"n":{"type":"integer"}}}}}`, `{"o":{"n":"10"}}`, `{"o":{"n":10}}`},
	{"valid untouched", `{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":{"type":"string"}}`, `{"n":1,"m":"2"}`, `{"n":1,"m":"2"}`},
}

func TestCoerce(t *testing.T) {
	for _, tc := range coerceCases {
		t.Run(tc.name, func(t *testing.T) {
			in := decode(t, tc.in)
			got := model.Coerce(resolve(t, tc.schema), in)
			if !reflect.DeepEqual(got, decode(t, tc.want)) {
				b, _ := json.Marshal(got)
				t.Errorf("Coerce(%s) = %s, want %s", tc.in, b, tc.want)
			}
			if !reflect.DeepEqual(in, decode(t, tc.in)) {
				t.Errorf("Coerce modified its input")
			}
		})
	}
}

func FuzzCoerce(f *testing.F) {
	for _, tc := range coerceCases {
		f.Add(tc.schema, tc.in)
	}
	f.Fuzz(func(t *testing.T, schema, in string) {
		var s jsonschema.Schema
		if json.Unmarshal([]byte(schema), &s) != nil {
			return
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			return
		}
		var v any
		if json.Unmarshal([]byte(in), &v) != nil {
			return
		}
		orig := decode(t, in)
		once := model.Coerce(rs, v)
		if !reflect.DeepEqual(v, orig) {
			t.Fatalf("Coerce modified its input %s", in)
		}
		if rs.Validate(v) == nil && !reflect.DeepEqual(once, v) {
			t.Fatalf("Coerce changed %s, which already validates", in)
		}
		if twice := model.Coerce(rs, once); !reflect.DeepEqual(twice, once) {
			a, _ := json.Marshal(once)
			b, _ := json.Marshal(twice)
			t.Fatalf("not idempotent: %s → %s → %s", in, a, b)
		}
		if _, err := json.Marshal(once); err != nil {
			t.Fatalf("coerced value does not encode: %v", err)
		}
	})
}
