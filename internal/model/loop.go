package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// Names of the tools the loop itself answers.
const (
	NameSearchTools   = "search_tools"
	NameCallTool      = "call_tool"
	NameActivateSkill = "activate_skill"
	NameSubmitResult  = "submit_result"
)

// Call is one validated call the loop asks the caller to run.
type Call struct {
	// ID is the model's tool call id, stable across restarts: the caller derives its
	// idempotency key from it.
	ID string
	// Tool is the visible tool the call runs.
	Tool Tool
	// Arguments are the coerced, schema-valid arguments.
	Arguments json.RawMessage
	// Approval is set only when the run resumes the call that waited for it.
	Approval json.RawMessage
	// Resumed: this non-read call was started before a restart and has no outcome, so it may
	// have run; the caller decides by its idempotency key (or reports an unknown outcome).
	Resumed bool
}

// Caller runs a call through the governed pipeline (policy, approval, timeout, idempotency,
// audit) and returns its normalised outcome. A refusal is an Observation, not an error; an
// error is [ErrApprovalRequired] or a failure that stops the run.
type Caller interface {
	Call(ctx context.Context, c Call) (Observation, error)
}

// Saver stores the conversation. Run calls it after every model turn and every tool outcome,
// before the next step.
type Saver interface {
	Save(ctx context.Context, c *Conversation) error
}

// Completer is one model round trip; [*Client] is one.
type Completer interface {
	Complete(ctx context.Context, r Request) (Reply, error)
}

// Status is how a Run ended without an error.
type Status string

const (
	// StatusCompleted: the model answered with text.
	StatusCompleted Status = "completed"
	// StatusNeedsApproval: a call waits for an approver (Outcome.Pending).
	StatusNeedsApproval Status = "needs_approval"
	// StatusSubmitted: the model called submit_result with a valid result (Outcome.Result),
	// for the output gate to decide; then [Loop.Reject] or done.
	StatusSubmitted Status = "submitted"
)

// Outcome is a Run's ending.
type Outcome struct {
	// Status is how the run ended.
	Status Status
	// Text is the model's answer, for [StatusCompleted].
	Text string
	// Result is the submitted result, for [StatusSubmitted].
	Result json.RawMessage
	// Pending is the call waiting for an approver, for [StatusNeedsApproval].
	Pending *Pending
}

// Loop runs one model skill's conversations. It is safe for concurrent use by many tasks.
type Loop struct {
	model Completer
	cfg   SkillConfig

	skills    []Skill
	outputRaw json.RawMessage
	output    *jsonschema.Resolved
	outputMap map[string]any
	progress  func(string)
	obsLimit  int

	mu      sync.Mutex
	schemas map[string]*jsonschema.Resolved // by tool name + schema text
	defs    map[string][]ToolDef            // by mode + snapshot version
}

// Env is what one task's run is bound to: the catalog as its caller may see it, the governed
// pipeline acting for that caller, and the task's state store.
type Env struct {
	// Catalog resolves the snapshot of the tools the task's caller may use.
	Catalog Catalog
	// Caller runs each call through the governed pipeline as the task's caller.
	Caller Caller
	// Saver stores the task's conversation after every step.
	Saver Saver
}

// run is one task's step of a Loop.
type run struct {
	*Loop
	Env
}

// NewLoop returns the loop of the skill cfg (its instructions already read from
// instructions_file when that was used), shared by all its tasks. It fails only on an
// unusable output schema.
func NewLoop(model Completer, cfg SkillConfig, opts ...Option) (*Loop, error) {
	l := &Loop{model: model, cfg: cfg.WithDefaults(),
		progress: func(string) {}, obsLimit: DefaultObservationLimit,
		schemas: map[string]*jsonschema.Resolved{}, defs: map[string][]ToolDef{}}
	for _, o := range opts {
		o.apply(l)
	}
	if l.outputRaw != nil {
		rs, err := resolveSchema(l.outputRaw)
		if err != nil {
			return nil, fmt.Errorf("output schema: %w", err)
		}
		l.output = rs
		if err := json.Unmarshal(l.outputRaw, &l.outputMap); err != nil {
			return nil, fmt.Errorf("output schema: %w", err)
		}
	}
	return l, nil
}

// Start resolves the snapshot, decides the visible set and the mode for the whole task, and
// returns the stored first state: the instructions and the user's input.
func (l *Loop) Start(ctx context.Context, env Env, input string) (*Conversation, error) {
	snap, err := env.Catalog.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("resolve catalog: %w", err)
	}
	vis, why := Visible(snap.Tools, l.cfg.Tools, l.cfg.Delegates)
	c := &Conversation{Mode: ModeAll, Snapshot: snap.Version, Visible: why}
	if EstimateTokens(vis) > l.cfg.SchemaBudgetTokens {
		c.Mode = ModeSearch
	}
	c.Messages = []Message{{Role: RoleSystem, Content: l.system(c.Mode)}, {Role: RoleUser, Content: input}}
	if err := env.Saver.Save(ctx, c); err != nil {
		return nil, fmt.Errorf("save conversation: %w", err)
	}
	return c, nil
}

// system is the system message: the instructions, the skills on offer, and in search mode
// how to find tools.
func (l *Loop) system(mode Mode) string {
	var b strings.Builder
	b.WriteString(l.cfg.Instructions)
	if len(l.skills) > 0 {
		b.WriteString("\n\nSkills you can load with activate_skill:\n")
		for _, s := range l.skills {
			fmt.Fprintf(&b, "- %s: %s\n", s.Name, s.Description)
		}
	}
	if mode == ModeSearch {
		b.WriteString("\n\nFind tools with search_tools, then run one with call_tool.")
	}
	if l.output != nil {
		b.WriteString("\n\nFinish by calling submit_result with the result.")
	}
	return b.String()
}

// Run continues c from its last stored step until the model answers, submits a result, a
// call waits for an approval, or a limit is hit. approval is passed to the pending call only.
func (l *Loop) Run(ctx context.Context, env Env, c *Conversation, approval json.RawMessage) (Outcome, error) {
	return run{l, env}.run(ctx, c, approval)
}

func (l run) run(ctx context.Context, c *Conversation, approval json.RawMessage) (Outcome, error) {
	if n := len(c.Messages); n > 0 && c.Messages[n-1].Role == RoleAssistant && len(c.Messages[n-1].ToolCalls) == 0 {
		return l.final(c.Messages[n-1]) // stored before a restart: the answer stands
	}
	for {
		snap, tools, err := l.resolve(ctx, c)
		if err != nil {
			return Outcome{}, err
		}
		if out, done, err := l.answerOpenCalls(ctx, c, tools, approval); done || err != nil {
			return out, err
		}
		if c.Turns >= l.cfg.MaxTurns {
			return Outcome{}, fmt.Errorf("%w (%d)", ErrMaxTurns, l.cfg.MaxTurns)
		}
		reply, err := l.model.Complete(ctx, Request{Messages: c.Messages, Tools: l.toolDefs(c.Mode, snap, tools)})
		if err != nil {
			return Outcome{}, fmt.Errorf("model turn %d: %w", c.Turns+1, err)
		}
		c.Turns++
		c.Messages = append(c.Messages, Message{Role: RoleAssistant, Content: reply.Content, ToolCalls: reply.ToolCalls})
		if err := l.Saver.Save(ctx, c); err != nil {
			return Outcome{}, fmt.Errorf("save conversation: %w", err)
		}
		if len(reply.ToolCalls) == 0 {
			return l.final(c.Messages[len(c.Messages)-1])
		}
	}
}

// final is the ending of a model turn without tool calls.
func (l run) final(m Message) (Outcome, error) {
	if l.output != nil {
		return Outcome{}, ErrNoResult
	}
	return Outcome{Status: StatusCompleted, Text: m.Content}, nil
}

// resolve reads the current snapshot and the visible set, recording both in c.
func (l run) resolve(ctx context.Context, c *Conversation) (string, map[string]Tool, error) {
	snap, err := l.Catalog.Snapshot(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("resolve catalog: %w", err)
	}
	vis, why := Visible(snap.Tools, l.cfg.Tools, l.cfg.Delegates)
	c.Snapshot, c.Visible = snap.Version, why
	tools := make(map[string]Tool, len(vis))
	for _, t := range vis {
		tools[t.Name] = t
	}
	return snap.Version, tools, nil
}

// answerOpenCalls gives every call of the last model turn that has no tool message yet its
// one result, saving after each. done is set when the run must stop here.
func (l run) answerOpenCalls(ctx context.Context, c *Conversation, tools map[string]Tool, approval json.RawMessage) (Outcome, bool, error) {
	last := -1
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == RoleAssistant {
			last = i
			break
		}
	}
	if last < 0 {
		return Outcome{}, false, nil
	}
	for _, tc := range c.Messages[last].ToolCalls {
		if c.answered(tc.ID) {
			continue
		}
		if c.Result != nil && tc.ID == c.ResultCall { // waiting for the output gate
			continue
		}
		var appr json.RawMessage
		if c.Pending != nil && c.Pending.CallID == tc.ID {
			appr = approval
		}
		out, stop, err := l.answer(ctx, c, tc, tools, appr)
		if err != nil || stop {
			return out, true, err
		}
	}
	if c.Result != nil {
		return Outcome{Status: StatusSubmitted, Result: c.Result}, true, nil
	}
	return Outcome{}, false, nil
}

// answer handles one proposed call and appends its tool message, or stops the run.
func (l run) answer(ctx context.Context, c *Conversation, tc ToolCall, tools map[string]Tool, approval json.RawMessage) (Outcome, bool, error) {
	if rec := c.record(tc.ID); rec != nil && rec.Outcome != nil { // ran before a crash: never again
		return Outcome{}, false, l.reply(ctx, c, tc.ID, rec.Name, *rec.Outcome)
	}
	if c.Result != nil { // submit_result ended the turn
		return Outcome{}, false, l.reply(ctx, c, tc.ID, tc.Name, refusal(ClassNotRun, "not run: the result was already submitted"))
	}
	switch {
	case tc.Name == NameSearchTools && c.Mode == ModeSearch:
		var a struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal([]byte(orEmpty(tc.Arguments)), &a); err != nil {
			return Outcome{}, false, l.reply(ctx, c, tc.ID, tc.Name, refusal(ClassValidationFailed, "arguments are not a JSON object with a query"))
		}
		vis := make([]Tool, 0, len(tools))
		for _, v := range c.Visible {
			vis = append(vis, tools[v.Name])
		}
		out, _ := json.Marshal(Search(vis, a.Query))
		l.progress(fmt.Sprintf("searching tools for %q", cutUTF8(a.Query, 80)))
		return Outcome{}, false, l.reply(ctx, c, tc.ID, tc.Name, Observation{Status: ObservationSuccess, Output: out})
	case tc.Name == NameCallTool && c.Mode == ModeSearch:
		var a struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal([]byte(orEmpty(tc.Arguments)), &a); err != nil {
			return Outcome{}, false, l.reply(ctx, c, tc.ID, tc.Name, refusal(ClassValidationFailed, "arguments are not a JSON object with name and arguments"))
		}
		args := string(a.Arguments)
		var s string
		if json.Unmarshal(a.Arguments, &s) == nil { // arguments sent as a JSON string
			args = s
		}
		return l.callTool(ctx, c, ToolCall{ID: tc.ID, Name: a.Name, Arguments: args}, tools, approval)
	case tc.Name == NameActivateSkill && len(l.skills) > 0:
		var a struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal([]byte(orEmpty(tc.Arguments)), &a)
		for _, s := range l.skills {
			if s.Name == a.Name {
				if !slices.Contains(c.Activated, s.Name) {
					c.Activated = append(c.Activated, s.Name)
				}
				out, _ := json.Marshal(s.Body)
				l.progress("activating skill " + s.Name)
				return Outcome{}, false, l.reply(ctx, c, tc.ID, tc.Name, Observation{Status: ObservationSuccess, Output: out})
			}
		}
		return Outcome{}, false, l.reply(ctx, c, tc.ID, tc.Name, refusal(ClassValidationFailed, fmt.Sprintf("no skill named %q", a.Name)))
	case tc.Name == NameSubmitResult && l.output != nil:
		v, msg := l.arguments(l.output, tc.Arguments)
		if msg != "" {
			l.progress("result refused: " + msg)
			return Outcome{}, false, l.reply(ctx, c, tc.ID, tc.Name, refusal(ClassValidationFailed, msg))
		}
		c.Result, c.ResultCall = v, tc.ID
		if err := l.Saver.Save(ctx, c); err != nil {
			return Outcome{}, true, fmt.Errorf("save conversation: %w", err)
		}
		l.progress("result submitted")
		return Outcome{}, false, nil
	}
	return l.callTool(ctx, c, tc, tools, approval)
}

// callTool runs a catalog tool or a delegate through the caller, after the loop's own checks.
func (l run) callTool(ctx context.Context, c *Conversation, tc ToolCall, tools map[string]Tool, approval json.RawMessage) (Outcome, bool, error) {
	if c.record(tc.ID) == nil { // a call resumed after its approval was counted already
		if c.ToolCalls >= l.cfg.MaxToolCalls {
			l.progress("refused " + tc.Name + ": tool call limit reached")
			return Outcome{}, false, l.reply(ctx, c, tc.ID, tc.Name, refusal(ClassLimitExceeded,
				fmt.Sprintf("tool call limit (%d) reached: answer with what you have", l.cfg.MaxToolCalls)))
		}
		c.ToolCalls++
	}
	t, ok := tools[tc.Name]
	if !ok {
		l.progress("refused " + tc.Name + ": not available to this skill")
		return Outcome{}, false, l.reply(ctx, c, tc.ID, tc.Name, refusal(ClassUnavailableTool, fmt.Sprintf("tool %q is not available", tc.Name)))
	}
	rs, err := l.schema(t)
	if err != nil {
		return Outcome{}, false, l.reply(ctx, c, tc.ID, tc.Name, refusal(ClassValidationFailed, "the tool's input schema is unusable"))
	}
	args, msg := l.arguments(rs, tc.Arguments)
	if msg != "" {
		l.progress("refused " + tc.Name + ": " + msg)
		return Outcome{}, false, l.reply(ctx, c, tc.ID, tc.Name, refusal(ClassValidationFailed, msg))
	}
	if c.record(tc.ID) == nil {
		c.Calls = append(c.Calls, CallRecord{ID: tc.ID, Turn: c.Turns, Name: tc.Name, Arguments: args})
	}
	rec := c.record(tc.ID)
	call := Call{ID: tc.ID, Tool: t, Arguments: args, Approval: approval, Resumed: rec.Started}
	if !t.ReadOnly && !rec.Started {
		// A write is saved as started before it runs: after a kill -9 mid-call, the resumed
		// run tells the caller that the call may have happened. Reads simply run again.
		rec.Started = true
		if err := l.Saver.Save(ctx, c); err != nil {
			return Outcome{}, true, fmt.Errorf("save conversation: %w", err)
		}
	}
	l.progress("calling " + tc.Name)
	obs, err := l.Caller.Call(ctx, call)
	if errors.Is(err, ErrApprovalRequired) {
		p := &Pending{CallID: tc.ID, Tool: tc.Name}
		if ae := (*ApprovalError)(nil); errors.As(err, &ae) {
			p.Request = ae.Request
		}
		c.Pending = p
		c.record(tc.ID).Started = false // it did not run
		if err := l.Saver.Save(ctx, c); err != nil {
			return Outcome{}, true, fmt.Errorf("save conversation: %w", err)
		}
		l.progress(tc.Name + " waits for an approval")
		return Outcome{Status: StatusNeedsApproval, Pending: p}, true, nil
	}
	if err != nil {
		return Outcome{}, true, fmt.Errorf("call %s (%s): %w", tc.Name, tc.ID, err)
	}
	if c.Pending != nil && c.Pending.CallID == tc.ID {
		c.Pending = nil
	}
	if obs.Status != ObservationSuccess {
		l.progress(fmt.Sprintf("%s ended %s", tc.Name, obs.ErrorClass))
	}
	return Outcome{}, false, l.reply(ctx, c, tc.ID, tc.Name, obs)
}

// arguments parses, coerces and validates raw against rs; msg is the model-facing problem.
func (l *Loop) arguments(rs *jsonschema.Resolved, raw string) (json.RawMessage, string) {
	var v any
	if err := json.Unmarshal([]byte(orEmpty(raw)), &v); err != nil {
		return nil, "arguments are not valid JSON: " + err.Error()
	}
	v = Coerce(rs, v)
	if err := rs.Validate(v); err != nil {
		return nil, "arguments do not match the schema: " + err.Error()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, "arguments cannot be encoded: " + err.Error()
	}
	return b, ""
}

// reply records obs as id's outcome, appends the one tool message for id and saves.
func (l run) reply(ctx context.Context, c *Conversation, id, name string, obs Observation) error {
	obs, text := normalise(obs, l.obsLimit)
	if rec := c.record(id); rec != nil {
		rec.Outcome = &obs
	} else {
		c.Calls = append(c.Calls, CallRecord{ID: id, Turn: c.Turns, Name: name, Outcome: &obs})
	}
	c.Messages = append(c.Messages, Message{Role: RoleTool, ToolCallID: id, Content: text})
	if err := l.Saver.Save(ctx, c); err != nil {
		return fmt.Errorf("save conversation: %w", err)
	}
	return nil
}

// Reject sends the output gate's reasons back to the model as submit_result's result, once.
// A second rejection returns [ErrNotCommitted] with the reasons. Run continues afterwards.
func (l *Loop) Reject(ctx context.Context, env Env, c *Conversation, reasons []string) error {
	if c.Result == nil {
		return fmt.Errorf("reject: no result was submitted")
	}
	if c.Rejections >= 1 {
		return fmt.Errorf("%w: %s", ErrNotCommitted, strings.Join(reasons, "; "))
	}
	id := c.ResultCall
	c.Result, c.ResultCall = nil, ""
	c.Rejections++
	out, _ := json.Marshal(map[string]any{"reasons": reasons})
	l.progress("result rejected by the output gate")
	return run{l, env}.reply(ctx, c, id, NameSubmitResult, Observation{Status: ObservationError, ErrorClass: "rejected", Error: "the result was not accepted; fix it and call submit_result again", Output: out})
}

// toolDefs is what the model is offered in mode, cached per snapshot version.
func (l *Loop) toolDefs(mode Mode, snap string, tools map[string]Tool) []ToolDef {
	// The key names the visible tools too: two callers with other entitlements may see the
	// same snapshot version, and one must never be offered the other's tools.
	names := sortedKeys(tools)
	key := string(mode) + "\x00" + snap + "\x00" + strings.Join(names, "\x00")
	l.mu.Lock()
	defs, ok := l.defs[key]
	l.mu.Unlock()
	if ok {
		return defs
	}
	if mode == ModeSearch {
		defs = append(defs,
			ToolDef{Name: NameSearchTools, Description: "Search the tools you may use by what they do. Returns names, descriptions and full input schemas.",
				Parameters: map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}}, "required": []any{"query"}}},
			ToolDef{Name: NameCallTool, Description: "Call a tool found with search_tools.",
				Parameters: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}, "arguments": map[string]any{"type": "object"}}, "required": []any{"name", "arguments"}}})
	} else {
		for _, name := range names {
			t := tools[name]
			params := map[string]any{}
			if json.Unmarshal(t.InputSchema, &params) != nil || len(params) == 0 {
				params = map[string]any{"type": "object"}
			}
			defs = append(defs, ToolDef{Name: t.Name, Description: t.Description, Parameters: params})
		}
	}
	if len(l.skills) > 0 {
		defs = append(defs, ToolDef{Name: NameActivateSkill, Description: "Load a skill's instructions by name.",
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []any{"name"}}})
	}
	if l.output != nil {
		defs = append(defs, ToolDef{Name: NameSubmitResult, Description: "Submit the final result.", Parameters: l.outputMap})
	}
	l.mu.Lock()
	if len(l.defs) > 64 { // snapshots change rarely; bound the cache anyway
		clear(l.defs)
	}
	l.defs[key] = defs
	l.mu.Unlock()
	return defs
}

// schema is t's resolved input schema, cached.
func (l *Loop) schema(t Tool) (*jsonschema.Resolved, error) {
	key := t.Name + "\x00" + string(t.InputSchema)
	l.mu.Lock()
	rs, ok := l.schemas[key]
	l.mu.Unlock()
	if ok {
		return rs, nil
	}
	raw := t.InputSchema
	if len(raw) == 0 {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	rs, err := resolveSchema(raw)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	if len(l.schemas) > 1024 {
		clear(l.schemas)
	}
	l.schemas[key] = rs
	l.mu.Unlock()
	return rs, nil
}

// resolveSchema decodes and resolves a JSON Schema.
func resolveSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("decode schema: %w", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("resolve schema: %w", err)
	}
	return rs, nil
}

// orEmpty reads empty arguments as an empty object, as models send them for no-argument tools.
func orEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "{}"
	}
	return s
}

func sortedKeys(m map[string]Tool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
