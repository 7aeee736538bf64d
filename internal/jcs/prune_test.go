package jcs

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"
)

// prunedReference is the reference for AppendPruned: drop the empty values,
// encode the tree, and canonicalise the text with gowebpki/jcs. Nothing left
// is nil.
func prunedReference(tree map[string]any) ([]byte, error) {
	cleaned, ok := dropEmpty(tree)
	if !ok {
		return nil, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cleaned); err != nil {
		return nil, err
	}
	return jcs.Transform(buf.Bytes())
}

func dropEmpty(v any) (any, bool) {
	switch v := v.(type) {
	case nil:
		return nil, false
	case string:
		return v, v != ""
	case []any:
		out := make([]any, 0, len(v))
		for _, e := range v {
			if e, ok := dropEmpty(e); ok {
				out = append(out, e)
			}
		}
		return out, len(out) > 0
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if e, ok := dropEmpty(e); ok {
				out[k] = e
			}
		}
		return out, len(out) > 0
	default:
		return v, true
	}
}

func decodeTree(b []byte) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var tree map[string]any
	if dec.Decode(&tree) != nil || tree == nil {
		return nil, false
	}
	return tree, true
}

// prunedSeeds cover what the writer decides itself: member order by UTF-16
// units (U+E000..U+FFFF against surrogate pairs), escapes, ES6 numbers, and
// empty values at every depth.
var prunedSeeds = map[string]string{
	"order":    `{"b":1,"a":2,"aa":3,"A":4,"":5,"é":6,"\uffff":7,"😀":8,"\ue000":9,"a\u0000":10}`,
	"escapes":  `{"s":"\"\\\/\b\f\n\r\t\u0001\u001f\u007f\u2028<>&é😀"}`,
	"numbers":  `{"n":[0,-0,1e21,1e20,1E-7,0.000001,123456789012345678901234567890,-1.5e-300,5e-324,0.1,1.0,100]}`,
	"empties":  `{"a":null,"b":"","c":[],"d":{},"e":[null,"",[],{}],"f":{"g":{"h":[{}]}},"k":false,"z":0}`,
	"nothing":  `{"a":{"b":[]}}`,
	"nested":   `{"x":[{"b":true,"a":[1,[2,{"c":"d"}]]}],"y":{"z":{"w":"v"}}}`,
	"keyquote": `{"a\"b":1,"a\\b":2,"a\nb":3}`,
}

func TestAppendPrunedMatchesTransform(t *testing.T) {
	for name, in := range prunedSeeds {
		t.Run(name, func(t *testing.T) {
			tree, ok := decodeTree([]byte(in))
			if !ok {
				t.Fatalf("seed does not decode: %s", in)
			}
			want, err := prunedReference(tree)
			if err != nil {
				t.Fatalf("reference: %v", err)
			}
			got, err := AppendPruned(nil, tree)
			if err != nil {
				t.Fatalf("AppendPruned: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("AppendPruned:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestAppendPrunedRefuses(t *testing.T) {
	tests := map[string]map[string]any{
		"out of range": {"n": json.Number("1e400")},
		"bad utf-8":    {"s": "a\xffb"},
		"bad key":      {"\xff": "x"},
		"float64":      {"n": 1.5},
	}
	for name, tree := range tests {
		t.Run(name, func(t *testing.T) {
			if got, err := AppendPruned(nil, tree); err == nil {
				t.Fatalf("AppendPruned = %s, want an error", got)
			}
		})
	}
}

// FuzzAppendPruned checks AppendPruned against gowebpki/jcs on any JSON
// object: the same bytes, or an error from both.
func FuzzAppendPruned(f *testing.F) {
	for _, in := range prunedSeeds {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tree, ok := decodeTree(data)
		if !ok {
			return
		}
		want, wantErr := prunedReference(tree)
		got, err := AppendPruned(nil, tree)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("AppendPruned error %v, reference error %v", err, wantErr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("AppendPruned:\n got %s\nwant %s", got, want)
		}
	})
}

// BenchmarkAppendPruned compares, in one run, the writer with the text round
// trip through gowebpki/jcs that it replaces, on a signed card's tree.
func BenchmarkAppendPruned(b *testing.B) {
	tree, ok := decodeTree([]byte(benchCard))
	if !ok {
		b.Fatal("bench card does not decode")
	}
	for name, f := range map[string]func(map[string]any) ([]byte, error){
		"writer":    func(t map[string]any) ([]byte, error) { return AppendPruned(make([]byte, 0, 1024), t) },
		"transform": prunedReference,
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f(tree); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchCard is a card as agentcard canonicalises it (its 1.0 members).
const benchCard = `{"name":"Bench Agent","description":"Answers questions.","version":"1.2.3",
"supportedInterfaces":[{"url":"https://agent.example/a2a/jsonrpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],
"provider":{"organization":"Example","url":"https://example.org"},
"capabilities":{"streaming":true,"extensions":[{"uri":"https://ext.example/v1","params":{"n":2}}]},
"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain","application/json"],
"securitySchemes":{"bearer":{"httpAuthSecurityScheme":{"scheme":"bearer","bearerFormat":"JWT"}}},
"securityRequirements":[{"schemes":{"bearer":{"list":["read"]}}}],
"skills":[{"id":"qa","name":"Q&A","description":"Answers <questions>.","tags":["qa"],"examples":[]},
{"id":"sum","name":"Summary","description":"","tags":[]}]}`
