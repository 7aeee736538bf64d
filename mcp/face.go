package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// FaceTool is one of the agent's skills as the [Face] offers it.
type FaceTool struct {
	// Name is the tool's name: the skill's id.
	Name string
	// Title is the tool's title, shown to the MCP host.
	Title string
	// Description is the tool's description, shown to the MCP host.
	Description string
	// InputSchema is the skill's input schema; nil offers
	// {"text": string, "data": object}, the text and data parts of the
	// message the call becomes.
	InputSchema any
	// OutputSchema, when set, is offered as the tool's outputSchema; the
	// task's data artifact is the structuredContent it describes.
	OutputSchema any
	// MessageMetadata is set on every message a call of this tool becomes
	// (the skill it names, for the agent's skill router).
	MessageMetadata map[string]any
}

// TaskRunner is what the [Face] needs of the agent's task engine; the
// engine (an a2asrv.RequestHandler) provides it.
type TaskRunner interface {
	SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error]
	CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error)
}

// CallerFunc binds the caller of one MCP request, known by its HTTP headers,
// to ctx the way the agent's A2A routes do, or refuses it.
type CallerFunc func(ctx context.Context, header http.Header) (context.Context, error)

// A Face serves an agent's skills as MCP tools over streamable HTTP. Each
// tools/call becomes one A2A task of the caller, run by the agent's own
// engine: stored, governed and gated like any other, and visible to
// GetTask. The tool result carries the task's artifacts; a task that fails,
// is rejected or canceled is an isError result with the status message; a
// task that waits (input-required, auth-required) is an isError result that
// names the task and what it waits for, so the caller can continue it over
// A2A. Status updates become progress notifications when the client sent a
// progress token, and notifications/cancelled cancels the task.
type Face struct {
	server  *mcpsdk.Server
	handler http.Handler
	run     TaskRunner
	caller  CallerFunc
	cfg     faceConfig
}

// NewFace returns a Face named for the agent that serves tools through run,
// binding each request's caller with caller.
func NewFace(name, version string, tools []FaceTool, run TaskRunner, caller CallerFunc, opts ...FaceOption) *Face {
	f := &Face{run: run, caller: caller, cfg: newFaceConfig(opts)}
	// The SDK logs every session at info; the agent logs its requests once,
	// at the edge, so only the SDK's warnings and errors are kept.
	sdkLog := slog.New(atLeast{f.cfg.logger.Handler(), slog.LevelWarn})
	f.server = mcpsdk.NewServer(&mcpsdk.Implementation{Name: name, Version: version}, &mcpsdk.ServerOptions{Logger: sdkLog})
	for _, t := range tools {
		tool := &mcpsdk.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema}
		if tool.InputSchema == nil {
			tool.InputSchema = defaultFaceInput
		}
		f.server.AddTool(tool, f.callHandler(t))
	}
	// The SDK's DNS rebinding check accepts only loopback hosts on a
	// loopback listener; the Face does the same check itself, with the
	// agent's public hosts allowed too (see WithPublicHosts).
	f.handler = mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return f.server },
		&mcpsdk.StreamableHTTPOptions{Logger: sdkLog, DisableLocalhostProtection: true})
	return f
}

// hostAllowed reports whether a request may be served: on a loopback
// listener, only a loopback host or one of the public hosts is.
func (f *Face) hostAllowed(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !isLoopback(local.String()) {
		return true
	}
	if isLoopback(r.Host) {
		return true
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	for _, p := range f.cfg.publicHosts {
		if strings.EqualFold(host, p) {
			return true
		}
	}
	return false
}

// isLoopback reports whether addr (host or host:port) names a loopback
// address or localhost.
func isLoopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// atLeast drops records below a level.
type atLeast struct {
	slog.Handler
	min slog.Level
}

func (h atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h atLeast) WithAttrs(as []slog.Attr) slog.Handler {
	return atLeast{h.Handler.WithAttrs(as), h.min}
}
func (h atLeast) WithGroup(name string) slog.Handler {
	return atLeast{h.Handler.WithGroup(name), h.min}
}

// defaultFaceInput is the input of a skill that declares none.
var defaultFaceInput = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"text": map[string]any{"type": "string", "description": "The request, as the text of the A2A message."},
		"data": map[string]any{"type": "object", "description": "Structured input, as a data part of the A2A message."},
	},
}

// ServeHTTP serves the MCP streamable HTTP transport. The caller must be
// authenticated before: ServeHTTP binds it per call from the headers.
func (f *Face) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !f.hostAllowed(r) {
		http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
		return
	}
	f.handler.ServeHTTP(w, r)
}

// callHandler runs one tools/call of t as a task.
func (f *Face) callHandler(t FaceTool) mcpsdk.ToolHandler {
	return func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		var header http.Header
		if req.Extra != nil {
			header = req.Extra.Header
		}
		ctx, err := f.caller(ctx, header)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		msg, err := faceMessage(t, req.Params.Arguments)
		if err != nil {
			return nil, err // invalid params: the client's input
		}
		return f.runTask(ctx, t, req, msg), nil
	}
}

// faceMessage turns a call's arguments into the message its task starts with.
func faceMessage(t FaceTool, raw json.RawMessage) (*a2a.Message, error) {
	var args map[string]any
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil, fmt.Errorf("tool %s: arguments must be a JSON object: %w", t.Name, err)
		}
	}
	var parts []*a2a.Part
	if t.InputSchema == nil {
		if text, ok := args["text"].(string); ok && text != "" {
			parts = append(parts, a2a.NewTextPart(text))
		}
		if data, ok := args["data"].(map[string]any); ok {
			parts = append(parts, a2a.NewDataPart(data))
		}
	} else if args != nil {
		parts = append(parts, a2a.NewDataPart(args))
	}
	if len(parts) == 0 {
		parts = append(parts, a2a.NewTextPart(""))
	}
	m := a2a.NewMessage(a2a.MessageRoleUser, parts...)
	if len(t.MessageMetadata) > 0 {
		m.Metadata = make(map[string]any, len(t.MessageMetadata))
		for k, v := range t.MessageMetadata {
			m.Metadata[k] = v
		}
	}
	return m, nil
}

// runTask streams the task to its end, or to the state where it waits,
// relaying progress; when the client cancels the call, it cancels the task.
func (f *Face) runTask(ctx context.Context, t FaceTool, req *mcpsdk.CallToolRequest, msg *a2a.Message) *mcpsdk.CallToolResult {
	token := req.Params.GetProgressToken()
	var (
		task     *a2a.Task
		progress float64
	)
	for ev, err := range f.run.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}) {
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return errorResult(fmt.Sprintf("%s: %v", t.Name, err), nil)
		}
		switch ev := ev.(type) {
		case *a2a.Task:
			task = ev
		case *a2a.Message: // the skill answered with a message and no task
			return messageResult(ev)
		case *a2a.TaskStatusUpdateEvent:
			if task == nil {
				task = &a2a.Task{ID: ev.TaskID, ContextID: ev.ContextID}
			}
			task.Status = ev.Status
			if token != nil {
				progress++
				f.notifyProgress(ctx, req, token, progress, statusText(ev.Status))
			}
		case *a2a.TaskArtifactUpdateEvent:
			if task == nil {
				task = &a2a.Task{ID: ev.TaskID, ContextID: ev.ContextID}
			}
			task.Artifacts = appendArtifact(task.Artifacts, ev)
		}
	}
	if err := ctx.Err(); err != nil {
		return f.cancel(ctx, t, task)
	}
	if task == nil {
		return errorResult(t.Name+": the agent answered no task", nil)
	}
	return taskResult(task)
}

// cancel cancels the task whose call the client cancelled. Nobody reads the
// result (the SDK drops answers to cancelled requests), but the task must
// not go on working for a caller who left.
func (f *Face) cancel(ctx context.Context, t FaceTool, task *a2a.Task) *mcpsdk.CallToolResult {
	if task == nil || task.ID == "" || task.Status.State.Terminal() {
		return errorResult(t.Name+": cancelled", nil)
	}
	cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.cancelGrace)
	defer stop()
	if _, err := f.run.CancelTask(cctx, &a2a.CancelTaskRequest{ID: task.ID}); err != nil && !errors.Is(err, a2a.ErrTaskNotCancelable) {
		f.cfg.logger.Warn("mcp face: cancel task", slog.String("task_id", string(task.ID)), slog.String("tool", t.Name), slog.Any("error", err))
	}
	return errorResult(t.Name+": cancelled", nil)
}

func (f *Face) notifyProgress(ctx context.Context, req *mcpsdk.CallToolRequest, token any, n float64, text string) {
	err := req.Session.NotifyProgress(ctx, &mcpsdk.ProgressNotificationParams{ProgressToken: token, Progress: n, Message: text})
	if err != nil && ctx.Err() == nil {
		f.cfg.logger.Debug("mcp face: progress notification", slog.Any("error", err))
	}
}

// appendArtifact applies an artifact update: a new artifact, a replacement,
// or a chunk appended to the one with its id.
func appendArtifact(arts []*a2a.Artifact, ev *a2a.TaskArtifactUpdateEvent) []*a2a.Artifact {
	if ev.Artifact == nil {
		return arts
	}
	for i, a := range arts {
		if a.ID != ev.Artifact.ID {
			continue
		}
		if ev.Append {
			merged := *a
			merged.Parts = append(append([]*a2a.Part{}, a.Parts...), ev.Artifact.Parts...)
			arts[i] = &merged
		} else {
			arts[i] = ev.Artifact
		}
		return arts
	}
	return append(arts, ev.Artifact)
}

// taskResult is the tool result of a task in the state it stopped in.
func taskResult(task *a2a.Task) *mcpsdk.CallToolResult {
	state := task.Status.State
	switch {
	case state == a2a.TaskStateCompleted:
		return artifactsResult(task)
	case state == a2a.TaskStateInputRequired || state == a2a.TaskStateAuthRequired:
		waiting := map[string]any{"task_id": string(task.ID), "context_id": task.ContextID, "state": string(state)}
		text := fmt.Sprintf("Task %s is %s: continue it over A2A (SendMessage with taskId %s).", task.ID, stateName(state), task.ID)
		if m := task.Status.Message; m != nil {
			for _, p := range m.Parts {
				if d, ok := p.Data().(map[string]any); ok {
					for k, v := range d {
						waiting[k] = v // the approval request, as a tool skill states it
					}
				}
			}
			if s := statusText(task.Status); s != "" {
				text += " " + s
			}
		}
		res := errorResult(text, waiting)
		res.Meta = taskMeta(task)
		return res
	default:
		text := fmt.Sprintf("Task %s ended %s", task.ID, stateName(state))
		if s := statusText(task.Status); s != "" {
			text += ": " + s
		}
		res := errorResult(text, map[string]any{"task_id": string(task.ID), "state": string(state)})
		res.Meta = taskMeta(task)
		return res
	}
}

// artifactsResult carries a completed task's artifacts: text parts as text,
// the first data part as structuredContent (and data as JSON text when the
// artifacts hold no text, for hosts that read only text), files as
// resources.
func artifactsResult(task *a2a.Task) *mcpsdk.CallToolResult {
	res := &mcpsdk.CallToolResult{Meta: taskMeta(task)}
	var data []mcpsdk.Content
	hasText := false
	for _, a := range task.Artifacts {
		for _, p := range a.Parts {
			switch c := p.Content.(type) {
			case a2a.Text:
				hasText = true
				res.Content = append(res.Content, &mcpsdk.TextContent{Text: string(c)})
			case a2a.Data:
				if res.StructuredContent == nil {
					if obj, ok := c.Value.(map[string]any); ok {
						res.StructuredContent = obj
					}
				}
				if b, err := json.Marshal(c.Value); err == nil {
					data = append(data, &mcpsdk.TextContent{Text: string(b)})
				}
			case a2a.Raw:
				res.Content = append(res.Content, &mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{
					URI: "a2a://tasks/" + string(task.ID) + "/artifacts/" + string(a.ID) + "/" + p.Filename, MIMEType: p.MediaType,
					Blob: []byte(c), // the SDK writes it as base64
				}})
			case a2a.URL:
				res.Content = append(res.Content, &mcpsdk.ResourceLink{URI: string(c), Name: nonEmpty(p.Filename, string(c)), MIMEType: p.MediaType})
			}
		}
	}
	if !hasText {
		res.Content = append(res.Content, data...)
	}
	if len(res.Content) == 0 {
		text := statusText(task.Status)
		if text == "" {
			text = "Task " + string(task.ID) + " completed."
		}
		res.Content = append(res.Content, &mcpsdk.TextContent{Text: text})
	}
	return res
}

// TaskMetaKey names, in a tool result's _meta, the A2A task the call ran as:
// GetTask with that id reads it, SendMessage with it continues it.
const TaskMetaKey = "handoff/task_id"

func taskMeta(task *a2a.Task) mcpsdk.Meta {
	return mcpsdk.Meta{TaskMetaKey: string(task.ID)}
}

func messageResult(m *a2a.Message) *mcpsdk.CallToolResult {
	res := &mcpsdk.CallToolResult{}
	for _, p := range m.Parts {
		if s := p.Text(); s != "" {
			res.Content = append(res.Content, &mcpsdk.TextContent{Text: s})
		}
	}
	if len(res.Content) == 0 {
		res.Content = append(res.Content, &mcpsdk.TextContent{Text: ""})
	}
	return res
}

// errorResult is an isError result: the text for the model, the details as
// structuredContent.
func errorResult(text string, details map[string]any) *mcpsdk.CallToolResult {
	res := &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: text}}}
	if details != nil {
		res.StructuredContent = details
	}
	return res
}

// statusText is the text of a status message.
func statusText(s a2a.TaskStatus) string {
	if s.Message == nil {
		return ""
	}
	var texts []string
	for _, p := range s.Message.Parts {
		if t := p.Text(); t != "" {
			texts = append(texts, t)
		}
	}
	return strings.Join(texts, " ")
}

// stateName is a state as people write it: "input-required", not
// TASK_STATE_INPUT_REQUIRED.
func stateName(s a2a.TaskState) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_")), "_", "-")
}

func nonEmpty(s, fallback string) string {
	if s != "" {
		return s
	}
	return fallback
}
