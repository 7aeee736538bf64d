// Package rest03 serves the A2A 0.3 HTTP+JSON binding as the official 0.3
// SDKs speak it: the proto JSON of package a2a.v1 on the /v1 paths
// (POST /v1/message:send, GET /v1/tasks/{id}, ...), with errors as
// {"code", "message"} carrying the JSON-RPC code of the A2A error, as the
// JS SDK 0.3 server writes them and its client reads them.
//
// a2a-go v2.3.1's a2av0 REST handler speaks another dialect (snake_case
// JSON of its legacy types on paths without /v1) that the JS and Python
// 0.3 clients cannot read; the agent serves that one on the bare paths and
// this one under /v1. Requests are converted with a2a-go's a2apb/v0/pbconv
// and answered by the same a2asrv.RequestHandler as every other binding.
package rest03

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"

	a2apb "github.com/a2aproject/a2a-go/a2apb"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2apb/v0/pbconv"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// NewHandler returns the handler of the /v1 paths, relative to the
// binding's URL (mount it under http.StripPrefix). Request bodies must be
// bounded by the caller.
func NewHandler(h a2asrv.RequestHandler) http.Handler {
	s := &server{h: h}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/message:send", s.send)
	mux.HandleFunc("POST /v1/message:stream", s.stream)
	mux.HandleFunc("GET /v1/tasks/{task}", s.getTask)     // also {id}:subscribe
	mux.HandleFunc("POST /v1/tasks/{task}", s.taskAction) // {id}:cancel, {id}:subscribe
	mux.HandleFunc("POST /v1/tasks/{task}/pushNotificationConfigs", s.createConfig)
	mux.HandleFunc("GET /v1/tasks/{task}/pushNotificationConfigs", s.listConfigs)
	mux.HandleFunc("GET /v1/tasks/{task}/pushNotificationConfigs/{config}", s.getConfig)
	mux.HandleFunc("DELETE /v1/tasks/{task}/pushNotificationConfigs/{config}", s.deleteConfig)
	mux.HandleFunc("GET /v1/card", s.card)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, _ := a2asrv.NewCallContext(r.Context(), a2av0.ToServiceParams(r.Header))
		mux.ServeHTTP(w, r.WithContext(ctx))
	})
}

type server struct{ h a2asrv.RequestHandler }

var (
	unmarshal = protojson.UnmarshalOptions{DiscardUnknown: true}
	marshal   = protojson.MarshalOptions{}
)

func (s *server) send(w http.ResponseWriter, r *http.Request) {
	req, ok := readSend(w, r)
	if !ok {
		return
	}
	res, err := s.h.SendMessage(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := pbconv.ToProtoSendMessageResponse(res)
	if err != nil {
		writeError(w, fmt.Errorf("%w: encode the answer: %w", a2a.ErrInternalError, err))
		return
	}
	writeProto(w, http.StatusOK, out)
}

func (s *server) stream(w http.ResponseWriter, r *http.Request) {
	req, ok := readSend(w, r)
	if !ok {
		return
	}
	writeStream(w, r, s.h.SendStreamingMessage(r.Context(), req))
}

func readSend(w http.ResponseWriter, r *http.Request) (*a2a.SendMessageRequest, bool) {
	var in a2apb.SendMessageRequest
	if !readProto(w, r, &in) {
		return nil, false
	}
	req, err := pbconv.FromProtoSendMessageRequest(&in)
	if err != nil {
		writeError(w, fmt.Errorf("%w: %w", a2a.ErrInvalidParams, err))
		return nil, false
	}
	return req, true
}

// getTask answers GET /v1/tasks/{id} and GET /v1/tasks/{id}:subscribe.
func (s *server) getTask(w http.ResponseWriter, r *http.Request) {
	id, action := splitAction(r.PathValue("task"))
	switch action {
	case "":
	case "subscribe":
		writeStream(w, r, s.h.SubscribeToTask(r.Context(), &a2a.SubscribeToTaskRequest{ID: id}))
		return
	default:
		writeError(w, fmt.Errorf("%w: no method %q", a2a.ErrMethodNotFound, action))
		return
	}
	req := &a2a.GetTaskRequest{ID: id}
	for _, name := range []string{"historyLength", "history_length"} {
		if raw := r.URL.Query().Get(name); raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil || n < 0 {
				writeError(w, fmt.Errorf("%w: %s %q is not a count", a2a.ErrInvalidParams, name, raw))
				return
			}
			req.HistoryLength = &n
		}
	}
	task, err := s.h.GetTask(r.Context(), req)
	s.answerTask(w, task, err)
}

// taskAction answers POST /v1/tasks/{id}:cancel and :subscribe.
func (s *server) taskAction(w http.ResponseWriter, r *http.Request) {
	id, action := splitAction(r.PathValue("task"))
	switch action {
	case "cancel":
		task, err := s.h.CancelTask(r.Context(), &a2a.CancelTaskRequest{ID: id})
		s.answerTask(w, task, err)
	case "subscribe":
		writeStream(w, r, s.h.SubscribeToTask(r.Context(), &a2a.SubscribeToTaskRequest{ID: id}))
	default:
		writeError(w, fmt.Errorf("%w: no method %q", a2a.ErrMethodNotFound, action))
	}
}

func (s *server) answerTask(w http.ResponseWriter, task *a2a.Task, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := pbconv.ToProtoTask(task)
	if err != nil {
		writeError(w, fmt.Errorf("%w: encode the task: %w", a2a.ErrInternalError, err))
		return
	}
	writeProto(w, http.StatusOK, out)
}

// createConfig takes the body as CreateTaskPushNotificationConfigRequest
// (what the JS SDK 0.3 server reads) or as TaskPushNotificationConfig (what
// its client sends).
func (s *server) createConfig(w http.ResponseWriter, r *http.Request) {
	task := a2a.TaskID(r.PathValue("task"))
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var pc *a2apb.PushNotificationConfig
	var create a2apb.CreateTaskPushNotificationConfigRequest
	if unmarshal.Unmarshal(body, &create) == nil && create.GetConfig().GetPushNotificationConfig() != nil {
		pc = create.GetConfig().GetPushNotificationConfig()
		if pc.GetId() == "" {
			pc.Id = create.GetConfigId()
		}
	} else {
		var tc a2apb.TaskPushNotificationConfig
		if err := unmarshal.Unmarshal(body, &tc); err != nil || tc.GetPushNotificationConfig() == nil {
			writeError(w, fmt.Errorf("%w: the body is no push notification config", a2a.ErrInvalidParams))
			return
		}
		pc = tc.GetPushNotificationConfig()
	}
	in := &a2apb.TaskPushNotificationConfig{Name: pbconv.MakeConfigName(task, pc.GetId()), PushNotificationConfig: pc}
	cfg, err := pbconv.FromProtoTaskPushConfig(in)
	if err != nil {
		writeError(w, fmt.Errorf("%w: %w", a2a.ErrInvalidParams, err))
		return
	}
	cfg.TaskID = task
	saved, err := s.h.CreateTaskPushConfig(r.Context(), cfg)
	s.answerConfig(w, saved, err)
}

func (s *server) getConfig(w http.ResponseWriter, r *http.Request) {
	cfg, err := s.h.GetTaskPushConfig(r.Context(), &a2a.GetTaskPushConfigRequest{TaskID: a2a.TaskID(r.PathValue("task")), ID: r.PathValue("config")})
	s.answerConfig(w, cfg, err)
}

func (s *server) answerConfig(w http.ResponseWriter, cfg *a2a.PushConfig, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := pbconv.ToProtoTaskPushConfig(cfg)
	if err != nil {
		writeError(w, fmt.Errorf("%w: encode the config: %w", a2a.ErrInternalError, err))
		return
	}
	writeProto(w, http.StatusOK, out)
}

func (s *server) listConfigs(w http.ResponseWriter, r *http.Request) {
	res, err := s.h.ListTaskPushConfigs(r.Context(), &a2a.ListTaskPushConfigRequest{TaskID: a2a.TaskID(r.PathValue("task"))})
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := pbconv.ToProtoListTaskPushConfigResponse(res)
	if err != nil {
		writeError(w, fmt.Errorf("%w: encode the configs: %w", a2a.ErrInternalError, err))
		return
	}
	writeProto(w, http.StatusOK, out)
}

func (s *server) deleteConfig(w http.ResponseWriter, r *http.Request) {
	err := s.h.DeleteTaskPushConfig(r.Context(), &a2a.DeleteTaskPushConfigRequest{TaskID: a2a.TaskID(r.PathValue("task")), ID: r.PathValue("config")})
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, "{}")
}

func (s *server) card(w http.ResponseWriter, r *http.Request) {
	card, err := s.h.GetExtendedAgentCard(r.Context(), &a2a.GetExtendedAgentCardRequest{})
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := pbconv.ToProtoAgentCard(card)
	if err != nil {
		writeError(w, fmt.Errorf("%w: encode the card: %w", a2a.ErrInternalError, err))
		return
	}
	writeProto(w, http.StatusOK, out)
}

// splitAction splits "ID:cancel" into the id and the action.
func splitAction(s string) (a2a.TaskID, string) {
	id, action, _ := strings.Cut(s, ":")
	return a2a.TaskID(id), action
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, fmt.Errorf("%w: the body exceeds %d bytes", a2a.ErrInvalidRequest, tooLarge.Limit))
		} else {
			writeError(w, fmt.Errorf("%w: reading the body failed", a2a.ErrInvalidRequest))
		}
		return nil, false
	}
	return body, true
}

func readProto(w http.ResponseWriter, r *http.Request, m proto.Message) bool {
	body, ok := readBody(w, r)
	if !ok {
		return false
	}
	body, err := renameMessageParts(body, "content", "parts")
	if err == nil {
		err = unmarshal.Unmarshal(body, m)
	}
	if err != nil {
		writeError(w, fmt.Errorf("%w: %v", a2a.ErrParseError, err))
		return false
	}
	return true
}

func writeProto(w http.ResponseWriter, status int, m proto.Message) {
	b, err := encode(m)
	if err != nil {
		writeError(w, fmt.Errorf("%w: encode the answer: %w", a2a.ErrInternalError, err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// encode writes m as proto JSON with the messages' parts named content.
func encode(m proto.Message) ([]byte, error) {
	b, err := marshal.Marshal(m)
	if err != nil {
		return nil, err
	}
	return renameMessageParts(b, "parts", "content")
}

// renameMessageParts renames the parts of every message in a JSON document
// (an object with a messageId) from one name to the other. The official
// 0.3 a2a.proto calls them content, a2a-go's copy of it parts (field 5 in
// both), so the proto JSON of the two differs only there.
func renameMessageParts(doc []byte, from, to string) ([]byte, error) {
	if !strings.Contains(string(doc), `"`+from+`"`) {
		return doc, nil
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, err
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if _, isMessage := v["messageId"]; isMessage {
				if parts, ok := v[from]; ok {
					v[to] = parts
					delete(v, from)
				}
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(v)
	return json.Marshal(v)
}

// writeStream answers with server-sent events, one StreamResponse each. An
// error before the first event is an HTTP error; after it, an "error" event.
func writeStream(w http.ResponseWriter, r *http.Request, events iter.Seq2[a2a.Event, error]) {
	rc := http.NewResponseController(w)
	started := false
	for ev, err := range events {
		if err == nil && ev == nil {
			continue
		}
		var data []byte
		if err == nil {
			var pb *a2apb.StreamResponse
			if pb, err = pbconv.ToProtoStreamResponse(ev); err == nil {
				if su := pb.GetStatusUpdate(); su != nil {
					// 0.3 marks the update that ends the stream; 1.0 dropped it.
					su.Final = endsStream(su.GetStatus().GetState())
				}
				data, err = encode(pb)
			}
			if err != nil {
				err = fmt.Errorf("%w: encode the event: %w", a2a.ErrInternalError, err)
			}
		}
		if err != nil && !started {
			writeError(w, err)
			return
		}
		if !started {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		if err != nil {
			e, _ := json.Marshal(errorBody(err))
			_, _ = fmt.Fprintf(w, "event: error\ndata: %s\n\n", e)
			_ = rc.Flush()
			return
		}
		if _, werr := fmt.Fprintf(w, "data: %s\n\n", data); werr != nil {
			return
		}
		if rc.Flush() != nil || r.Context().Err() != nil {
			return
		}
	}
}

// endsStream reports whether a status update in state s is the last of a
// 0.3 stream: a terminal state, or one that waits for the client.
func endsStream(s a2apb.TaskState) bool {
	switch s {
	case a2apb.TaskState_TASK_STATE_COMPLETED, a2apb.TaskState_TASK_STATE_FAILED, a2apb.TaskState_TASK_STATE_CANCELLED,
		a2apb.TaskState_TASK_STATE_REJECTED, a2apb.TaskState_TASK_STATE_INPUT_REQUIRED, a2apb.TaskState_TASK_STATE_AUTH_REQUIRED:
		return true
	}
	return false
}

// codes are the JSON-RPC codes of the A2A errors and the HTTP status the
// JS SDK 0.3 server answers each with.
var codes = []struct {
	err    error
	code   int
	status int
}{
	{a2a.ErrTaskNotFound, -32001, http.StatusNotFound},
	{a2a.ErrTaskNotCancelable, -32002, http.StatusConflict},
	{a2a.ErrPushNotificationNotSupported, -32003, http.StatusBadRequest},
	{a2a.ErrUnsupportedOperation, -32004, http.StatusBadRequest},
	{a2a.ErrUnsupportedContentType, -32005, http.StatusBadRequest},
	{a2a.ErrInvalidAgentResponse, -32006, http.StatusInternalServerError},
	{a2a.ErrExtendedCardNotConfigured, -32007, http.StatusBadRequest},
	{a2a.ErrParseError, -32700, http.StatusBadRequest},
	{a2a.ErrInvalidRequest, -32600, http.StatusBadRequest},
	{a2a.ErrMethodNotFound, -32601, http.StatusNotFound},
	{a2a.ErrInvalidParams, -32602, http.StatusBadRequest},
	{a2a.ErrUnauthenticated, -31401, http.StatusUnauthorized},
	{a2a.ErrUnauthorized, -31403, http.StatusForbidden},
}

func errorBody(err error) map[string]any {
	code, _ := codeOf(err)
	msg := "internal error"
	if code != -32603 {
		msg = err.Error() // a2a errors are written for clients
	}
	return map[string]any{"code": code, "message": msg}
}

func codeOf(err error) (code, status int) {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code, c.status
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return -32603, http.StatusServiceUnavailable
	}
	return -32603, http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, err error) {
	_, status := codeOf(err)
	b, _ := json.Marshal(errorBody(err))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
