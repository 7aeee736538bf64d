package mcp

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/handoff-a2a/handoff/mcp/policy"
)

// Effect is what a tool does to the world, as the local contract says.
type Effect string

const (
	// EffectRead: the tool only reads. Only a read is retried after a lost connection.
	EffectRead Effect = "read"
	// EffectWrite: the tool changes state that can be changed back.
	EffectWrite Effect = "write"
	// EffectDestructive: the tool deletes or overwrites what cannot be restored.
	EffectDestructive Effect = "destructive"
	// EffectExternalSend: the tool sends something outside (mail, a payment, a post) that
	// cannot be recalled.
	EffectExternalSend Effect = "external_send"
)

// Risk is how much harm a wrong call of a tool can do, as the local contract says.
type Risk string

const (
	// RiskLow: a wrong call is cheap to notice and undo.
	RiskLow Risk = "low"
	// RiskHigh: a wrong call is costly.
	RiskHigh Risk = "high"
)

// ApprovalMode says whether a tool's calls wait for a human approval.
type ApprovalMode string

const (
	// ApprovalNone: calls run without an approval, unless the policy table still asks
	// (high-risk destructive or external_send tools; see [Decision]).
	ApprovalNone ApprovalMode = "none"
	// ApprovalMandatory: every call waits for an approval bound to its arguments.
	ApprovalMandatory ApprovalMode = "mandatory"
)

// IdempotencyScope says which calls of a tool carry the same idempotency key, so that a
// server which honours the key runs them once. The key travels in the call's _meta under
// [IdempotencyMetaKey]; servers that do not know it ignore it.
type IdempotencyScope string

const (
	// IdempotencyNone: calls carry no key. The default for read tools.
	IdempotencyNone IdempotencyScope = "none"
	// IdempotencyTask: calls of the tool with the same arguments in the same A2A task share
	// a key: a retry, and a re-run after unknown_outcome or an approval, are one operation.
	// The default for every other effect. A call with no task id carries no key.
	IdempotencyTask IdempotencyScope = "task"
	// IdempotencyArguments: calls of the tool with the same arguments share a key, whichever
	// task makes them: the arguments name the operation ("charge order 42").
	IdempotencyArguments IdempotencyScope = "arguments"
)

// IdempotencyMetaKey is the _meta key of a tool call that carries its idempotency key: a
// hex SHA-256 of the scope's inputs (task id, tool, argument digest), stable across retries
// and agent restarts.
const IdempotencyMetaKey = "io.github.handoff-a2a/idempotency-key"

// Contract is the local contract of a tool: what the operator says the tool does and how its
// calls are governed. Server annotations (readOnlyHint, destructiveHint…) are never trusted
// for any of this: the server is the party being governed.
type Contract struct {
	// Tool is an exact catalog name ("server__tool") or a path.Match glob ("server__*"). When
	// several contracts match a tool, the exact one wins, else the longest glob; equally long
	// globs are tried in the order given to [NewPipeline].
	Tool string
	// Effect classifies what the tool does. Empty, it takes the fail-closed value of
	// [DefaultContract], as do Risk and Approval, so a contract that only sets a Timeout still
	// needs approval.
	Effect Effect
	// Risk classifies how much harm a wrong call does.
	Risk Risk
	// Approval says whether the tool's calls wait for a human approval.
	Approval ApprovalMode
	// Timeout bounds each call; zero means the Manager's default ([WithCallTimeout]).
	Timeout time.Duration
	// Redact names top-level arguments whose values are never stored, logged or shown: they
	// are masked in an [ApprovalRequest] and scrubbed from every reason and error the pipeline
	// returns or audits. The argument digest still covers them, so an approval binds their
	// values all the same.
	Redact []string
	// OutputSchema, if set, replaces the server's outputSchema for validating
	// structuredContent: the operator, not the server, says what a good answer looks like.
	OutputSchema map[string]any
	// Idempotency says which calls share an idempotency key. Empty means
	// [IdempotencyNone] for a read tool and [IdempotencyTask] for any other.
	Idempotency IdempotencyScope
	// Resources say where the arguments name paths, URLs or ids; the policy sees them only
	// in canonical form (see [policy.Extract]).
	Resources []policy.ResourceSpec
	// Tags are words a model's tool search ranks the tool by (MCP tools carry none of their
	// own). They decide nothing.
	Tags []string
}

// DefaultContract is the contract of a tool no configured contract matches: a high-risk write
// that needs an approval. The policy's default layer denies such a tool's calls
// ([policy.RuleNoContract]); only a configured allow rule lets one run.
func DefaultContract(tool string) Contract {
	return Contract{Tool: tool, Effect: EffectWrite, Risk: RiskHigh, Approval: ApprovalMandatory}
}

// isGlob reports whether a contract's Tool is a pattern rather than a catalog name.
func isGlob(pattern string) bool { return strings.ContainsAny(pattern, `*?[\`) }

// contracts finds a tool's contract: exact names first, then globs, longest first.
type contracts struct {
	exact map[string]compiledContract
	globs []compiledContract // by pattern length, longest first; ties keep config order
}

// compiledContract is a checked contract with its output schema compiled once, not per call.
type compiledContract struct {
	Contract
	output  *jsonschema.Resolved // nil: the tool's own output schema applies
	matched bool                 // a configured contract, not DefaultContract
}

// newContracts checks every contract and reports every problem at once.
func newContracts(list []Contract) (contracts, error) {
	cs := contracts{exact: make(map[string]compiledContract)}
	seen := make(map[string]bool, len(list))
	var errs []error
	for _, c := range list {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("tool contract %q: "+format, append([]any{c.Tool}, args...)...))
		}
		cc, problems := compileContract(c)
		for _, p := range problems {
			bad("%s", p)
		}
		if seen[c.Tool] {
			bad("configured twice")
		}
		seen[c.Tool] = true
		if len(problems) > 0 {
			continue
		}
		if isGlob(c.Tool) {
			cs.globs = append(cs.globs, cc)
		} else {
			cs.exact[c.Tool] = cc
		}
	}
	slices.SortStableFunc(cs.globs, func(a, b compiledContract) int { return len(b.Tool) - len(a.Tool) })
	return cs, errors.Join(errs...)
}

// compileContract fills the fail-closed defaults into c and checks it.
func compileContract(c Contract) (compiledContract, []string) {
	def := DefaultContract(c.Tool)
	c.Effect = cmp.Or(c.Effect, def.Effect)
	c.Risk = cmp.Or(c.Risk, def.Risk)
	c.Approval = cmp.Or(c.Approval, def.Approval)
	c.Redact = slices.Clone(c.Redact)
	if c.Idempotency == "" {
		c.Idempotency = IdempotencyTask
		if c.Effect == EffectRead {
			c.Idempotency = IdempotencyNone
		}
	}
	var problems []string
	if c.Tool == "" {
		problems = append(problems, "no tool name or pattern")
	} else if _, err := path.Match(c.Tool, ""); err != nil {
		problems = append(problems, fmt.Sprintf("bad pattern: %v", err))
	}
	switch c.Effect {
	case EffectRead, EffectWrite, EffectDestructive, EffectExternalSend:
	default:
		problems = append(problems, fmt.Sprintf("unknown effect %q (want read, write, destructive or external_send)", c.Effect))
	}
	switch c.Risk {
	case RiskLow, RiskHigh:
	default:
		problems = append(problems, fmt.Sprintf("unknown risk %q (want low or high)", c.Risk))
	}
	switch c.Approval {
	case ApprovalNone, ApprovalMandatory:
	default:
		problems = append(problems, fmt.Sprintf("unknown approval %q (want none or mandatory)", c.Approval))
	}
	switch c.Idempotency {
	case IdempotencyNone, IdempotencyTask, IdempotencyArguments:
	default:
		problems = append(problems, fmt.Sprintf("unknown idempotency %q (want none, task or arguments)", c.Idempotency))
	}
	if c.Timeout < 0 {
		problems = append(problems, "negative timeout")
	}
	if slices.Contains(c.Redact, "") {
		problems = append(problems, "empty name in redact")
	}
	if err := policy.CheckSpecs(c.Resources); err != nil {
		problems = append(problems, err.Error())
	}
	c.Resources = slices.Clone(c.Resources)
	cc := compiledContract{Contract: c, matched: true}
	if c.OutputSchema != nil {
		// Compiled here, so that a broken schema is refused at startup and a good one is not
		// compiled again on every call.
		rs, err := compileSchema(c.OutputSchema)
		if err != nil {
			problems = append(problems, fmt.Sprintf("output schema: %v", err))
		}
		cc.output = rs
	}
	return cc, problems
}

// lookup returns the contract of a catalog name, or DefaultContract if none matches.
func (cs contracts) lookup(tool string) compiledContract {
	if c, ok := cs.exact[tool]; ok {
		return c
	}
	for _, c := range cs.globs {
		if ok, _ := path.Match(c.Tool, tool); ok {
			return c
		}
	}
	c, _ := compileContract(DefaultContract(tool)) // fills the default idempotency; cannot fail
	c.matched = false
	return c
}
