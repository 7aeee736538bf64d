package acceptance

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// A term is one && term of a condition, and the values it reads.
type term struct {
	text  string
	prg   cel.Program
	reads []term // the result and evidence paths it reads (result.status), in order
}

// compileTerms compiles each top-level && term of a, and each path it reads.
func compileTerms(env *cel.Env, a *celast.AST) ([]term, error) {
	var terms []term
	for _, e := range conjuncts(a.Expr()) {
		t, err := compileTerm(env, a, e)
		if err != nil {
			return nil, err
		}
		for _, r := range celast.MatchDescendants(celast.NavigateExpr(a, e), isRead) {
			rt, err := compileTerm(env, a, r)
			if err != nil {
				return nil, err
			}
			if !slices.ContainsFunc(t.reads, func(x term) bool { return x.text == rt.text }) {
				t.reads = append(t.reads, rt)
			}
		}
		terms = append(terms, t)
	}
	return terms, nil
}

// conjuncts flattens the top-level && of e.
func conjuncts(e celast.Expr) []celast.Expr {
	if e.Kind() == celast.CallKind && e.AsCall().FunctionName() == operators.LogicalAnd {
		var out []celast.Expr
		for _, a := range e.AsCall().Args() {
			out = append(out, conjuncts(a)...)
		}
		return out
	}
	return []celast.Expr{e}
}

// isRead matches the longest field paths into result or evidence:
// result.status, not result alone, nor result.a within result.a.b.
func isRead(e celast.NavigableExpr) bool {
	if e.Kind() != celast.SelectKind || e.AsSelect().IsTestOnly() {
		return false
	}
	if p, ok := e.Parent(); ok && p.Kind() == celast.SelectKind {
		return false
	}
	root := e.AsSelect().Operand()
	for root.Kind() == celast.SelectKind {
		root = root.AsSelect().Operand()
	}
	return root.Kind() == celast.IdentKind && (root.AsIdent() == "result" || root.AsIdent() == "evidence")
}

// compileTerm compiles the subexpression e of a on its own.
func compileTerm(env *cel.Env, a *celast.AST, e celast.Expr) (term, error) {
	text, err := cel.ExprToString(e, a.SourceInfo())
	if err != nil {
		return term{}, fmt.Errorf("CEL: %w", err)
	}
	sub, iss := env.Compile(text)
	if iss.Err() != nil {
		return term{}, fmt.Errorf("CEL: %s: %w", text, iss.Err())
	}
	prg, err := env.Program(sub, cel.CostLimit(conditionCostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return term{}, fmt.Errorf("CEL: %s: %w", text, err)
	}
	return term{text: text, prg: prg}, nil
}

// maxShown bounds a value a refusal shows.
const maxShown = 64

// explain says why the condition is false: each term that is not true,
// with the value of each result or evidence path it reads, as JSON. Only
// the paths the condition names are shown, never the rest of the result.
func (c *condition) explain(ctx context.Context, result any, evidence map[string]any) string {
	vars := map[string]any{"result": result, "evidence": evidence}
	var out []string
	for _, t := range c.terms {
		if v, _, err := t.prg.ContextEval(ctx, vars); err == nil && v == types.True {
			continue
		}
		var seen []string
		for _, r := range t.reads {
			shown := "absent"
			if v, _, err := r.prg.ContextEval(ctx, vars); err == nil {
				shown = show(v)
			}
			seen = append(seen, r.text+" = "+shown)
		}
		s := t.text + " is false"
		if len(seen) > 0 {
			s += " (" + strings.Join(seen, ", ") + ")"
		}
		out = append(out, s)
	}
	if len(out) == 0 { // no terms compiled, or the whole failed for a reason no term shows
		return c.text + " is false"
	}
	return strings.Join(out, "; ")
}

// show renders a CEL value as JSON, cut at maxShown bytes.
func show(v ref.Val) string {
	n, err := v.ConvertToNative(reflect.TypeFor[any]())
	if err != nil {
		n = v.Value()
	}
	b, err := json.Marshal(n)
	if err != nil {
		return fmt.Sprintf("%T", n)
	}
	if len(b) > maxShown {
		return string(b[:maxShown]) + "…"
	}
	return string(b)
}
