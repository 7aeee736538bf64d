package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// listTasks answers GET /console/api/tasks?state=S&page=TOKEN&size=N: one
// page of the caller's tasks, newest first, through the engine's ListTasks.
func (c *Console) listTasks(w http.ResponseWriter, r *http.Request, _ caller) {
	q := r.URL.Query()
	req := &a2a.ListTasksRequest{Status: a2a.TaskState(q.Get("state")), PageToken: q.Get("page"), PageSize: 20}
	if s := q.Get("size"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > tasks.MaxPageSize {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("size must be between 1 and %d", tasks.MaxPageSize))
			return
		}
		req.PageSize = n
	}
	resp, err := c.cfg.Tasks.ListTasks(r.Context(), req)
	if err != nil {
		c.writeA2AError(w, "list tasks", err)
		return
	}
	out := struct {
		Tasks    []taskSummary `json:"tasks"`
		Total    int           `json:"total"`
		NextPage string        `json:"next_page,omitempty"`
	}{Tasks: []taskSummary{}, Total: resp.TotalSize, NextPage: resp.NextPageToken}
	for _, t := range resp.Tasks {
		out.Tasks = append(out.Tasks, summarise(t))
	}
	writeJSON(w, out)
}

// taskSummary is one row of the tasks page and of the live stream.
type taskSummary struct {
	ID        a2a.TaskID    `json:"id"`
	ContextID string        `json:"context_id"`
	State     a2a.TaskState `json:"state"`
	Updated   *time.Time    `json:"updated,omitempty"`
	Message   string        `json:"message,omitempty"`
}

func summarise(t *a2a.Task) taskSummary {
	return taskSummary{ID: t.ID, ContextID: t.ContextID, State: t.Status.State, Updated: t.Status.Timestamp, Message: textOf(t.Status.Message)}
}

// textOf joins a message's text parts.
func textOf(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range m.Parts {
		if p == nil {
			continue
		}
		if t := p.Text(); t != "" {
			if b.Len() > 0 {
				b.WriteString(" ")
			}
			b.WriteString(t)
		}
	}
	return b.String()
}

// timelineEvent is one entry of a task's event log.
type timelineEvent struct {
	Seq   uint64             `json:"seq"`
	Event a2a.StreamResponse `json:"event"`
}

// timeline answers GET /console/api/tasks/{id}: the task as its owner gets
// it, with its whole event log. Another caller's task is not found.
func (c *Console) timeline(w http.ResponseWriter, r *http.Request, _ caller) {
	id := a2a.TaskID(r.PathValue("id"))
	task, err := c.cfg.Tasks.GetTask(r.Context(), &a2a.GetTaskRequest{ID: id})
	if err != nil {
		c.writeA2AError(w, "get task", err)
		return
	}
	evs, err := c.cfg.Events.Events(r.Context(), id)
	if errors.Is(err, tasks.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no such task for this caller")
		return
	}
	if err != nil {
		c.cfg.Logger.Error("console: read events", slog.String("task_id", string(id)), slog.Any("error", err))
		writeError(w, http.StatusInternalServerError, "the task's events could not be read")
		return
	}
	out := struct {
		Task   *a2a.Task       `json:"task"`
		Events []timelineEvent `json:"events"`
	}{Task: task, Events: make([]timelineEvent, 0, len(evs))}
	for _, e := range evs {
		out.Events = append(out.Events, timelineEvent{Seq: e.Seq, Event: a2a.StreamResponse{Event: e.Event}})
	}
	b, err := json.Marshal(out)
	if err != nil {
		c.cfg.Logger.Error("console: encode timeline", slog.String("task_id", string(id)), slog.Any("error", err))
		writeError(w, http.StatusInternalServerError, "the task could not be encoded")
		return
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		writeError(w, http.StatusInternalServerError, "the task could not be encoded")
		return
	}
	writeJSON(w, hideTokens(tree))
}

// hideTokens drops the token of every approval request in v (a decoded
// JSON tree, changed in place): the console decides approvals on the
// server, so the browser has no use for a token, and none is shown.
func hideTokens(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if req, ok := e.(map[string]any); ok && k == "approval_request" {
				delete(req, "token")
			}
			hideTokens(e)
		}
	case []any:
		for _, e := range v {
			hideTokens(e)
		}
	}
	return v
}

// artifact answers GET /console/api/tasks/{id}/artifacts/{artifact}/{part}:
// one part of one of the task's artifacts as a download. A blob the part
// points at is served through the agent's blob route, with the same owner
// check.
func (c *Console) artifact(w http.ResponseWriter, r *http.Request, _ caller) {
	id := a2a.TaskID(r.PathValue("id"))
	task, err := c.cfg.Tasks.GetTask(r.Context(), &a2a.GetTaskRequest{ID: id})
	if err != nil {
		c.writeA2AError(w, "get task", err)
		return
	}
	var part *a2a.Part
	n, err := strconv.Atoi(r.PathValue("part"))
	for _, art := range task.Artifacts {
		if err == nil && art != nil && string(art.ID) == r.PathValue("artifact") && n >= 0 && n < len(art.Parts) {
			part = art.Parts[n]
		}
	}
	if part == nil {
		writeError(w, http.StatusNotFound, "no such artifact part")
		return
	}
	h := w.Header()
	name := part.Filename
	if name == "" {
		name = fmt.Sprintf("%s-%s-%d", id, r.PathValue("artifact"), n)
	}
	var body []byte
	media := part.MediaType
	switch content := part.Content.(type) {
	case a2a.Text:
		body, media = []byte(content), orDefault(media, "text/plain; charset=utf-8")
	case a2a.Raw:
		body, media = content, orDefault(media, "application/octet-stream")
	case a2a.Data:
		body, _ = json.MarshalIndent(content.Value, "", "  ")
		media = "application/json"
	case a2a.URL:
		c.blob(w, r, id, string(content))
		return
	default:
		writeError(w, http.StatusNotFound, "this part has no content to download")
		return
	}
	h.Set("Content-Type", media)
	h.Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(name))
	h.Set("Content-Security-Policy", "sandbox")
	_, _ = w.Write(body)
}

// blobPath is where the agent serves its blobs: a URL part under it names
// the task and the digest.
const blobPath = "/a2a/blobs/"

func (c *Console) blob(w http.ResponseWriter, r *http.Request, id a2a.TaskID, raw string) {
	u, err := url.Parse(raw)
	if err != nil {
		writeError(w, http.StatusNotFound, "this part's URL does not parse")
		return
	}
	_, rest, ok := strings.Cut(u.EscapedPath(), blobPath)
	if !ok || c.cfg.Blob == nil {
		writeError(w, http.StatusNotFound, "this part points elsewhere: "+raw)
		return
	}
	task, digest, ok := strings.Cut(rest, "/")
	if !ok || task != url.PathEscape(string(id)) {
		writeError(w, http.StatusNotFound, "this part points at another task's blob")
		return
	}
	r2 := r.Clone(r.Context())
	r2.SetPathValue("task", string(id))
	r2.SetPathValue("digest", digest)
	r2.URL.RawQuery = ""
	c.cfg.Blob.ServeHTTP(w, r2)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// stream answers GET /console/api/stream: Server-Sent Events, one "task"
// event with a task's summary whenever the engine commits events of a
// task the caller may read, and for approvers one "approvals" event when
// any task changed (the approvals page reloads its list). A comment every
// 15 seconds keeps proxies from closing the stream.
func (c *Console) stream(w http.ResponseWriter, r *http.Request, who caller) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming is not supported here")
		return
	}
	ids, stop := c.subscribe()
	defer stop()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": console stream\n\n")
	flusher.Flush()
	approver := who.name() != "" && c.cfg.IsApprover(who.name())
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	none := 0
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.stopped:
			return
		case <-ping.C:
			fmt.Fprint(w, ": ping\n\n")
		case id := <-ids:
			if approver {
				fmt.Fprint(w, "event: approvals\ndata: {}\n\n")
			}
			t, err := c.cfg.Tasks.GetTask(r.Context(), &a2a.GetTaskRequest{ID: id, HistoryLength: &none})
			if err != nil { // another caller's task, or gone: nothing to show
				break
			}
			b, err := json.Marshal(summarise(t))
			if err != nil {
				break
			}
			fmt.Fprintf(w, "event: task\ndata: %s\n\n", b)
		}
		flusher.Flush()
	}
}

// approvals answers GET /console/api/approvals: the approval requests the
// caller may see.
func (c *Console) approvals(w http.ResponseWriter, r *http.Request, _ caller) {
	list, err := c.cfg.Approvals.Pending(r.Context())
	if err != nil {
		c.cfg.Logger.Error("console: list approvals", slog.Any("error", err))
		writeError(w, http.StatusInternalServerError, "the approvals could not be read")
		return
	}
	if list == nil {
		list = []Approval{}
	}
	writeJSON(w, map[string]any{"approvals": list})
}

// decideRequest is the body of POST /console/api/approvals/{id}.
type decideRequest struct {
	Decision string `json:"decision"` // approve or deny
	Scope    string `json:"scope"`
	Reason   string `json:"reason"`
}

// decide answers POST /console/api/approvals/{id}: the caller's decision on
// the task's approval request, sent through the approval path.
func (c *Console) decide(w http.ResponseWriter, r *http.Request, who caller) {
	if !isJSON(r) {
		writeError(w, http.StatusUnsupportedMediaType, "send the decision as JSON")
		return
	}
	var in decideRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "the decision is not a JSON object")
		return
	}
	d := Decision{Scope: in.Scope, Reason: strings.TrimSpace(in.Reason)}
	switch in.Decision {
	case "approve":
		d.Approve = true
	case "deny":
	default:
		writeError(w, http.StatusBadRequest, `decision must be "approve" or "deny"`)
		return
	}
	if d.Scope == "" {
		d.Scope = "once"
	}
	if d.Scope != "once" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("scope %q is not supported yet: only once", d.Scope))
		return
	}
	id := a2a.TaskID(r.PathValue("id"))
	state, err := c.cfg.Approvals.Decide(r.Context(), id, d)
	if err != nil {
		c.writeA2AError(w, "decide approval", err)
		return
	}
	c.cfg.Logger.Info("console approval decision", slog.String("task_id", string(id)), slog.String("approver", who.name()),
		slog.String("decision", in.Decision))
	writeJSON(w, map[string]any{"task_id": id, "state": state})
}

// report answers GET /console/api/reports/{name}: one of the agent's own
// read-only JSON handlers, as the caller.
func (c *Console) report(w http.ResponseWriter, r *http.Request, _ caller) {
	h, ok := c.cfg.Reports[r.PathValue("name")]
	if !ok {
		writeError(w, http.StatusNotFound, "this agent has no such report")
		return
	}
	h.ServeHTTP(w, r)
}

// pushRetry answers POST /console/api/push/retry: the caller's request to
// retry a push delivery, handed to the agent's own handler, which checks
// that the config is the caller's.
func (c *Console) pushRetry(w http.ResponseWriter, r *http.Request, who caller) {
	if c.cfg.PushRetry == nil {
		writeError(w, http.StatusNotFound, "this agent delivers no push notifications")
		return
	}
	if !isJSON(r) {
		writeError(w, http.StatusUnsupportedMediaType, "send the retry as JSON")
		return
	}
	c.cfg.Logger.Info("console push retry", slog.String("operator", who.name()))
	c.cfg.PushRetry.ServeHTTP(w, r)
}

// writeA2AError answers an engine error: a task the caller may not see is
// not found, a refused request says why, anything else is logged.
func (c *Console) writeA2AError(w http.ResponseWriter, op string, err error) {
	switch {
	case errors.Is(err, a2a.ErrTaskNotFound), errors.Is(err, tasks.ErrNotFound):
		writeError(w, http.StatusNotFound, "no such task for this caller")
	case errors.Is(err, a2a.ErrInvalidParams), errors.Is(err, a2a.ErrUnsupportedOperation), errors.Is(err, ErrNoApproval):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		c.cfg.Logger.Error("console: "+op, slog.Any("error", err))
		writeError(w, http.StatusInternalServerError, op+" failed")
	}
}
