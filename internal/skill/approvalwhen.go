package skill

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"

	"github.com/handoff-a2a/handoff/mcp"
)

// ApprovalWhen is a skill's approval_when: a CEL condition over its
// result (the variable result) that, when true, sends the result to an
// approver before the task completes.
type ApprovalWhen struct {
	text string
	prg  cel.Program
}

// approvalWhenCost bounds one evaluation, as the acceptance gate bounds its
// conditions: the result is the model's.
const approvalWhenCost = 100_000

// CompileApprovalWhen compiles expr, which must give a bool.
func CompileApprovalWhen(expr string) (*ApprovalWhen, error) {
	env, err := cel.NewEnv(cel.Variable("result", cel.DynType), cel.ParserExpressionSizeLimit(4096), cel.ParserRecursionLimit(64))
	if err != nil {
		return nil, fmt.Errorf("approval_when: %w", err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("CEL: %w", iss.Err())
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("CEL: must be a bool, not %s", t)
	}
	prg, err := env.Program(ast, cel.CostLimit(approvalWhenCost))
	if err != nil {
		return nil, fmt.Errorf("CEL: %w", err)
	}
	return &ApprovalWhen{text: expr, prg: prg}, nil
}

// Match reports whether result needs an approval. A condition that cannot
// say (a missing field, a type mismatch) asks for one: it fails closed.
func (a *ApprovalWhen) Match(ctx context.Context, result any) bool {
	out, _, err := a.prg.ContextEval(ctx, map[string]any{"result": result})
	if err != nil {
		return true
	}
	b, ok := out.(types.Bool)
	return !ok || bool(b)
}

// resultApproval is the approval request of a result: it names
// submit_result and binds the result's digest to the task, as a tool
// call's request binds its arguments.
func resultApproval(task string, result json.RawMessage, reason string) *mcp.ApprovalRequest {
	var v any
	_ = json.Unmarshal(result, &v)
	canon, _ := json.Marshal(v) // map keys sorted: one spelling per value
	sum := sha256.Sum256(canon)
	digest := hex.EncodeToString(sum[:])
	token := sha256.Sum256([]byte(task + "\x00submit_result\x00" + digest))
	args, _ := v.(map[string]any)
	return &mcp.ApprovalRequest{Tool: "submit_result", Digest: digest, Token: hex.EncodeToString(token[:]), Arguments: args, Reason: reason}
}
