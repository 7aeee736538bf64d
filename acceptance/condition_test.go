package acceptance

import (
	"path/filepath"
	"testing"
)

// FuzzCondition: no expression panics CEL's compiler or evaluator, and a compiled condition
// either answers a bool or reports an error, whatever the tool returned.
func FuzzCondition(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, name := range files {
		c, err := LoadContract(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, v := range c.verifiers {
			f.Add(v.condition.text)
		}
	}
	for _, seed := range []string{
		`result.ok`,
		`size(evidence) > 0 && evidence.receipt.amount_cents / 0 == 1`,
		`[1, 2, 3].all(x, [1, 2, 3].all(y, [1, 2, 3].all(z, x + y + z > 0)))`,
		`"a".matches("(")`,
		`result.items.exists(i, i.id == evidence["receipt"]["receipt_id"])`,
		`int(result.amount) == 9223372036854775807 + 1`,
	} {
		f.Add(seed)
	}
	results := []any{
		nil,
		map[string]any{"status": "settled", "amount_cents": 1250.0, "ok": true, "items": []any{map[string]any{"id": "re_123"}}},
		[]any{"x", 1.0, false},
		"settled",
	}
	evidence := map[string]any{"receipt": map[string]any{"receipt_id": "re_123", "amount_cents": 1250.0}}
	f.Fuzz(func(t *testing.T, expr string) {
		c, err := compileCondition(expr)
		if err != nil {
			return
		}
		for _, r := range results {
			c.eval(t.Context(), r, evidence) // an error is an answer; a panic is the bug
		}
	})
}

// The cost limit stops a condition a peer's data would make expensive.
func TestConditionCostLimit(t *testing.T) {
	c, err := compileCondition(`result.all(a, result.all(b, result.all(c, result.all(d, a + b + c + d >= 0))))`)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]any, 200)
	for i := range big {
		big[i] = float64(i)
	}
	if _, err := c.eval(t.Context(), big, nil); err == nil {
		t.Error("a 200^4 loop ran to the end; want the cost limit to stop it")
	}
}
