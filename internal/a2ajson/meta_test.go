package a2ajson

import (
	"encoding/json"
	"math"
	"testing"
)

// FuzzAppendAny checks the metadata writer against json.Marshal on objects
// made from the fuzzer's strings and numbers, nested and not.
func FuzzAppendAny(f *testing.F) {
	f.Add("skill", "echo <b>&</b>", 1.5, true)
	f.Add("", "\u2028\xff", math.Inf(1), false)
	f.Fuzz(func(t *testing.T, k, s string, n float64, flag bool) {
		m := map[string]any{
			k: s, "n": n, "flag": flag, "nil": nil, "list": []any{s, n},
			"nested": map[string]any{s: k, "deeper": map[string]any{"x": flag}},
			"typed":  map[string]string{k: s},
		}
		want, wantErr := json.Marshal(m)
		got, err := appendAny(nil, m)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("appendAny error %v, json.Marshal error %v", err, wantErr)
		}
		if err == nil && string(got) != string(want) {
			t.Fatalf("appendAny = %s\njson.Marshal = %s", got, want)
		}
	})
}

func TestAppendAnyMatchesMarshal(t *testing.T) {
	for _, m := range []map[string]any{
		{"b": "2", "a": "1", "c": map[string]any{}},
		{"nilmap": map[string]any(nil), "num": 3, "raw": json.RawMessage(`{"z": 1}`)},
		{"k01": 1, "k02": 2, "k03": 3, "k04": 4, "k05": 5, "k06": 6, "k07": 7, "k08": 8, "k09": 9,
			"k10": 10, "k11": 11, "k12": 12, "k13": 13, "k14": 14, "k15": 15, "k16": 16, "k17": 17},
	} {
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendAny(nil, m)
		if err != nil || string(got) != string(want) {
			t.Errorf("appendAny = %s, %v; json.Marshal = %s", got, err, want)
		}
	}
	if _, err := appendAny(nil, map[string]any{"bad": math.NaN()}); err == nil {
		t.Error("appendAny of NaN gave no error; json.Marshal refuses it")
	}
}
