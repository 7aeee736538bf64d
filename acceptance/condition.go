package acceptance

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
)

// Limits on a condition. Contracts are local files, but a condition runs on data a peer chose,
// so its cost is bounded, and the parser limits keep a pathological expression from exhausting
// the stack at load.
const (
	conditionCostLimit  = 100_000
	conditionMaxLength  = 4096
	conditionMaxNesting = 64
)

// celEnv declares what a condition sees: result, the verifier tool's structured result, and
// evidence, each expected artifact's data by name. Both are JSON values, hence dyn.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("result", cel.DynType),
		cel.Variable("evidence", cel.MapType(cel.StringType, cel.DynType)),
		cel.ParserExpressionSizeLimit(conditionMaxLength),
		cel.ParserRecursionLimit(conditionMaxNesting),
		cel.EnableMacroCallTracking(), // so that a term with a macro prints as written
	)
})

// A condition is a compiled CEL expression that must evaluate to true.
type condition struct {
	text string
	prg  cel.Program
	// terms are the condition's top-level && terms, each compiled alone,
	// so that a false condition can say which term failed and what it read.
	terms []term
}

func compileCondition(expr string) (*condition, error) {
	if expr == "" {
		return nil, errors.New("required")
	}
	env, err := celEnv()
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("CEL: %w", iss.Err())
	}
	// dyn is accepted because result.ok is dyn until it runs; eval refuses a non-bool then.
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("CEL: must be a bool, not %s", t)
	}
	prg, err := env.Program(ast, cel.CostLimit(conditionCostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, fmt.Errorf("CEL: %w", err)
	}
	// Without its terms, a false condition is shown whole: still right, less precise.
	terms, _ := compileTerms(env, ast.NativeRep())
	return &condition{text: expr, prg: prg, terms: terms}, nil
}

// eval runs the condition. An error means it could not say yes or no: a missing field, a type
// mismatch, the cost limit or ctx.
func (c *condition) eval(ctx context.Context, result any, evidence map[string]any) (bool, error) {
	out, _, err := c.prg.ContextEval(ctx, map[string]any{"result": result, "evidence": evidence})
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("condition gave %s, not a bool", out.Type())
	}
	return bool(b), nil
}
