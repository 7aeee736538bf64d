package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Outcome is the one terminal result of a tool call.
type Outcome string

const (
	// OutcomeSuccess: the tool ran and its output matches its output schema, if any.
	OutcomeSuccess Outcome = "success"
	// OutcomeValidationFailed: the arguments broke the tool's inputSchema (the tool did not
	// run), or its structuredContent broke the output schema (the output is withheld).
	OutcomeValidationFailed Outcome = "validation_failed"
	// OutcomePermissionDenied: the policy refused the call. Set by the policy layer.
	OutcomePermissionDenied Outcome = "permission_denied"
	// OutcomeApprovalRequired: the call waits for an approval. Set by the policy layer.
	OutcomeApprovalRequired Outcome = "approval_required"
	// OutcomeTimeout: a read tool did not answer within the call's deadline.
	OutcomeTimeout Outcome = "timeout"
	// OutcomeCancelled: the caller's context was cancelled.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomePartial: the tool did part of its work. Reserved; nothing in this package sets it
	// yet.
	OutcomePartial Outcome = "partial"
	// OutcomeUnknownOutcome: a write tool's request was sent and no answer came (deadline or
	// lost connection): it may or may not have run, and it is not retried.
	OutcomeUnknownOutcome Outcome = "unknown_outcome"
	// OutcomeUnavailableTool: the tool is not in the current snapshot, changed since the
	// snapshot the call was planned against, its server is down, or the server disowned it.
	OutcomeUnavailableTool Outcome = "unavailable_tool"
	// OutcomeToolError: the tool ran and reported a failure (isError: true). Its content says
	// why; it is the tool's answer, not a broken exchange.
	OutcomeToolError Outcome = "tool_error"
	// OutcomeProtocolError: the server answered with a JSON-RPC error (other than "no such
	// tool"), or a read tool's connection failed again on its one retry. Nothing says the
	// tool ran.
	OutcomeProtocolError Outcome = "protocol_error"
)

// CallRequest is one proposed tool call.
type CallRequest struct {
	// Tool is the catalog name, server__tool.
	Tool string
	// SnapshotVersion is the version of the snapshot the call was planned against. The tool
	// must be in the current snapshot with the same definition it had there.
	SnapshotVersion string
	// Arguments are validated against the tool's inputSchema; nil is sent as {}.
	Arguments map[string]any
	// Timeout bounds the call, retries included. Zero means the Manager's default
	// ([WithCallTimeout]).
	Timeout time.Duration
	// ReadOnly says the tool only reads, as the local contract decides, never the server's
	// annotations: a read is retried once after a lost connection, and its timeout is
	// [OutcomeTimeout]; a write then ends [OutcomeUnknownOutcome].
	ReadOnly bool
	// OutputSchema, if set, replaces the tool's own outputSchema for validating
	// structuredContent.
	OutputSchema json.RawMessage
	// IdempotencyKey, if set, is sent in the call's _meta under [IdempotencyMetaKey], the
	// same on a read's retry. The [Pipeline] derives it from the tool's contract.
	IdempotencyKey string
	// Progress, if set, asks the tool for progress: the call carries a progress token, and
	// every notifications/progress the server sends for it is passed on, in the order the
	// server sent them. Progress is never called after Call returns; a notification the
	// server sends right before its result may still be queued in the SDK when the result
	// arrives, and is then dropped. It runs on the session's notification path, so it must
	// not block: a slow callback delays the server's other notifications.
	Progress func(progress, total float64, message string)
}

// Result is the normalised result of a call.
type Result struct {
	// Outcome is the call's terminal result.
	Outcome Outcome
	// Tool echoes the request's tool.
	Tool string
	// SnapshotVersion echoes the request's snapshot version.
	SnapshotVersion string
	// ToolDigest is the definition the call ran against, empty when it never got that far.
	ToolDigest string
	// StructuredContent is the tool's structured output, set only on success.
	StructuredContent any
	// Content is the tool's unstructured output; for a tool error it carries the tool's
	// explanation.
	Content []mcpsdk.Content
	// Err says why the outcome is not success, in words safe to show the caller.
	Err error
	// Attempts counts requests sent to the server (2 when a read was retried).
	Attempts int
	// Duration is the call's wall time.
	Duration time.Duration
}

// Call runs one tool call through the pipeline and returns its normalised result. It never
// returns a Go error: every way a call can end is an [Outcome].
func (m *Manager) Call(ctx context.Context, req CallRequest) Result {
	start := time.Now()
	res := m.call(ctx, req)
	res.Tool, res.SnapshotVersion, res.Duration = req.Tool, req.SnapshotVersion, time.Since(start)
	return res
}

func fail(o Outcome, format string, args ...any) Result {
	return Result{Outcome: o, Err: fmt.Errorf(format, args...)}
}

func (m *Manager) call(ctx context.Context, req CallRequest) Result {
	tool, res, ok := m.resolve(req)
	if !ok {
		return res
	}
	args := req.Arguments
	if args == nil {
		args = map[string]any{} // the SDK would send a typed nil map as null
	}
	input, err := tool.inputSchema()
	if err != nil {
		return fail(OutcomeValidationFailed, "tool %s: unusable inputSchema: %v", req.Tool, err)
	}
	if err := validate(input, args); err != nil {
		return fail(OutcomeValidationFailed, "arguments of %s: %v", req.Tool, err)
	}
	output, err := outputSchema(tool, req.OutputSchema)
	if err != nil {
		return fail(OutcomeValidationFailed, "tool %s: unusable output schema: %v", req.Tool, err)
	}
	return m.invoke(ctx, tool, args, output, req)
}

// invoke sends a call whose tool was resolved and whose arguments were validated against it,
// and normalises the answer against output (nil: no output schema). The Pipeline comes here
// directly, having done both itself, so that no call pays for them twice. Only req's Tool,
// Timeout, ReadOnly, IdempotencyKey and Progress are read.
func (m *Manager) invoke(ctx context.Context, tool *Tool, args map[string]any, output *jsonschema.Resolved, req CallRequest) Result {
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = m.cfg.callTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	params := &mcpsdk.CallToolParams{Name: tool.Remote, Arguments: args}
	if req.IdempotencyKey != "" {
		params.Meta = mcpsdk.Meta{IdempotencyMetaKey: req.IdempotencyKey}
	}
	if req.Progress != nil {
		token, stop := m.routeProgress(req.Progress)
		defer stop()
		params.SetProgressToken(token)
	}
	sup := m.supervisor(tool.Server)
	if sup == nil { // removed by a reconfigure since the tool was resolved
		return fail(OutcomeUnavailableTool, "tool %s: its server is no longer configured", req.Tool)
	}
	attempts := 0
	var dead *mcpsdk.ClientSession
	for {
		sess, err := sup.session(cctx, dead)
		if err != nil {
			r := ended(ctx, cctx, req, attempts, err)
			r.ToolDigest, r.Attempts = tool.Digest, attempts
			return r
		}
		attempts++
		out, err := sess.CallTool(cctx, params)
		if err == nil {
			r := normalise(tool, out, output)
			if r.Outcome == OutcomeUnavailableTool {
				sup.requestRelist()
			}
			r.ToolDigest, r.Attempts = tool.Digest, attempts
			return r
		}
		if lostConnection(cctx, err) {
			sup.broken(sess)
			dead = sess
			if req.ReadOnly && attempts == 1 && cctx.Err() == nil {
				continue // a read may run twice: retry once on the next session
			}
		}
		r := ended(ctx, cctx, req, attempts, err)
		if r.Outcome == OutcomeUnavailableTool {
			sup.requestRelist()
		}
		r.ToolDigest, r.Attempts = tool.Digest, attempts
		return r
	}
}

// resolve finds the tool in the current snapshot and checks it is the one the call was
// planned against.
func (m *Manager) resolve(req CallRequest) (*Tool, Result, bool) {
	current := m.Snapshot()
	tool, ok := current.Tool(req.Tool)
	if !ok {
		return nil, fail(OutcomeUnavailableTool, "tool %s is not in the catalog", req.Tool), false
	}
	if req.SnapshotVersion != current.Version {
		planned, ok := m.snapshotAt(req.SnapshotVersion)
		if !ok {
			return nil, fail(OutcomeUnavailableTool, "snapshot %s is unknown or too old", req.SnapshotVersion), false
		}
		was, ok := planned.Tool(req.Tool)
		if !ok || was.Digest != tool.Digest {
			return nil, fail(OutcomeUnavailableTool, "tool %s changed since snapshot %s", req.Tool, req.SnapshotVersion), false
		}
	}
	return tool, Result{}, true
}

// outputSchema picks the request's override, or the tool's own schema (nil if it has none).
func outputSchema(tool *Tool, override json.RawMessage) (*jsonschema.Resolved, error) {
	if len(override) == 0 {
		return tool.outputSchema()
	}
	var v any
	if err := json.Unmarshal(override, &v); err != nil {
		return nil, err
	}
	return compileSchema(v)
}

// validate checks a JSON value against a schema. The value goes through a JSON round trip so
// that Go values (structs, typed numbers) are checked as the server will see them.
func validate(rs *jsonschema.Resolved, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return err
	}
	return rs.Validate(generic)
}

// ended classifies a call that got no result: unavailable server, cancellation, deadline,
// lost connection, or a JSON-RPC error.
func ended(ctx, cctx context.Context, req CallRequest, attempts int, err error) Result {
	sent := attempts > 0
	var rpcErr *jsonrpc.Error
	switch {
	case errors.Is(err, errServerDown):
		return fail(OutcomeUnavailableTool, "tool %s: its server is unavailable", req.Tool)
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fail(OutcomeCancelled, "call to %s cancelled", req.Tool)
	case errors.As(err, &rpcErr):
		if unknownTool(rpcErr.Message) {
			return fail(OutcomeUnavailableTool, "tool %s: the server does not know it: %s", req.Tool, rpcErr.Message)
		}
		return fail(OutcomeProtocolError, "tool %s: server error %d: %s", req.Tool, rpcErr.Code, rpcErr.Message)
	case cctx.Err() != nil || ctx.Err() != nil:
		if sent && !req.ReadOnly {
			return fail(OutcomeUnknownOutcome, "tool %s: no answer within the deadline; it may have run", req.Tool)
		}
		return fail(OutcomeTimeout, "tool %s: no answer within the deadline", req.Tool)
	case sent && !req.ReadOnly:
		return fail(OutcomeUnknownOutcome, "tool %s: connection lost after the request was sent; it may have run: %v", req.Tool, err)
	default:
		return fail(OutcomeProtocolError, "tool %s: %v", req.Tool, err)
	}
}

// lostConnection reports whether err means the session failed rather than the server
// answering: anything but a JSON-RPC error or the call's own deadline or cancellation. A
// stdio server that died mid-call surfaces as EOF or a closed pipe, a restarted HTTP server as
// ErrSessionMissing or a refused connection; all of them leave the session unusable.
func lostConnection(cctx context.Context, err error) bool {
	var rpcErr *jsonrpc.Error
	return cctx.Err() == nil && !errors.As(err, &rpcErr)
}

// unknownTool recognises a server saying it has no such tool. There is no error code for it:
// the Go SDK answers "unknown tool", the TypeScript SDK "Tool x not found".
func unknownTool(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "unknown tool") || (strings.Contains(m, "tool") && strings.Contains(m, "not found"))
}

// normalise turns a tool's answer into an outcome: isError is the tool's failure, and
// structuredContent must satisfy the output schema before it counts as success.
func normalise(tool *Tool, out *mcpsdk.CallToolResult, output *jsonschema.Resolved) Result {
	if out.IsError {
		if text := contentText(out.Content); unknownTool(text) {
			return Result{Outcome: OutcomeUnavailableTool, Err: fmt.Errorf("tool %s: the server does not know it: %s", tool.Name, text)}
		}
		return Result{Outcome: OutcomeToolError, Content: out.Content,
			Err: fmt.Errorf("tool %s reported an error: %s", tool.Name, contentText(out.Content))}
	}
	if output != nil {
		if out.StructuredContent == nil {
			return Result{Outcome: OutcomeValidationFailed,
				Err: fmt.Errorf("tool %s: no structuredContent, but an output schema applies", tool.Name)}
		}
		// Decoded from the wire by the SDK, it is plain JSON already: no round trip needed.
		if err := output.Validate(out.StructuredContent); err != nil {
			return Result{Outcome: OutcomeValidationFailed,
				Err: fmt.Errorf("tool %s: structuredContent breaks the output schema: %v", tool.Name, err)}
		}
	}
	return Result{Outcome: OutcomeSuccess, StructuredContent: out.StructuredContent, Content: out.Content}
}

// contentText joins the text blocks of a tool's content, for error messages.
func contentText(content []mcpsdk.Content) string {
	var parts []string
	for _, c := range content {
		if t, ok := c.(*mcpsdk.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, " ")
}
