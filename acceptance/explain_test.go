package acceptance

import (
	"strings"
	"testing"
)

// TestExplain: a false condition names each false && term, with the
// result and evidence paths that term reads; macros print as written.
func TestExplain(t *testing.T) {
	evidence := map[string]any{"receipt": map[string]any{"receipt_id": "re_123", "amount_cents": 1250.0}}
	for _, tt := range []struct{ name, expr, want string }{
		{"one term", `result.status == "settled"`, `result.status == "settled" is false (result.status = "pending")`},
		{"macro", `result.items.exists(i, i.id == evidence.receipt.receipt_id) && result.status == "pending"`,
			`result.items.exists(i, i.id == evidence.receipt.receipt_id) is false (result.items = [{"id":"re_9"}], evidence.receipt.receipt_id = "re_123")`},
		{"absent field", `result.missing == 1 && result.status == "pending"`, `result.missing == 1 is false (result.missing = absent)`},
		{"nested and", `(result.status == "pending" && result.n > 1) && result.n < 0`, `result.n > 1 is false (result.n = 1); result.n < 0 is false (result.n = 1)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := compileCondition(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			result := map[string]any{"status": "pending", "n": 1.0, "items": []any{map[string]any{"id": "re_9"}}}
			if got := c.explain(t.Context(), result, evidence); got != tt.want {
				t.Fatalf("explain = %s\n   want %s", got, tt.want)
			}
		})
	}
}

// FuzzExplain: explaining never panics, whatever the expression and the
// result, and names the whole condition or one of its terms.
func FuzzExplain(f *testing.F) {
	for _, seed := range []string{
		`result.status == "settled" && result.amount_cents == evidence.receipt.amount_cents`,
		`result.items.exists(i, i.id == evidence["receipt"]["receipt_id"])`,
		`result.a.b.c == 1 || result.d`,
		`[1, 2].all(x, x > result.n) && !result.ok`,
	} {
		f.Add(seed, `{"status": "x"}`)
	}
	evidence := map[string]any{"receipt": map[string]any{"receipt_id": "re_123", "amount_cents": 1250.0}}
	f.Fuzz(func(t *testing.T, expr, result string) {
		c, err := compileCondition(expr)
		if err != nil {
			return
		}
		r, err := normalize(map[string]any{"raw": result, "status": result, "items": []any{result}})
		if err != nil {
			return
		}
		got := c.explain(t.Context(), r, evidence)
		if !strings.Contains(got, " is false") {
			t.Fatalf("explain(%q) = %q", expr, got)
		}
	})
}
