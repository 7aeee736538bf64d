package script

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server answers Chat Completions by its script. It is an http.Handler.
type Server struct {
	script *Script
	mux    *http.ServeMux

	mu       sync.Mutex
	requests []json.RawMessage
	failed   map[int]int // rule index → requests it failed
	calls    int
}

// NewServer returns a server of s.
func NewServer(s *Script) *Server {
	srv := &Server{script: s, failed: map[int]int{}}
	srv.mux = http.NewServeMux()
	srv.mux.HandleFunc("POST /v1/chat/completions", srv.complete)
	srv.mux.HandleFunc("GET /v1/models", srv.models)
	srv.mux.HandleFunc("GET /debug/requests", srv.debug)
	return srv
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Requests returns the chat completion request bodies received so far, in order.
func (s *Server) Requests() []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]json.RawMessage(nil), s.requests...)
}

// request is the part of a Chat Completions request the script reads.
type request struct {
	Model    string    `json:"model"`
	Messages []message `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

type message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []toolCall      `json:"tool_calls"`
}

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// text is a message's content as text: a string, or the text parts of a list.
func (m message) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type, Text string
	}
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		httpError(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		httpError(w, http.StatusBadRequest, "decode body: "+err.Error())
		return
	}
	if req.Stream {
		httpError(w, http.StatusBadRequest, "streaming is not supported by the scripted model")
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, body)
	s.mu.Unlock()

	offered := make([]string, 0, len(req.Tools))
	for _, t := range req.Tools {
		offered = append(offered, t.Function.Name)
	}
	d := data(req.Messages)
	for i, rule := range s.script.Rules {
		calls, ok := s.matches(rule, req.Messages, offered)
		if !ok {
			continue
		}
		if rule.Fail != nil && s.failing(i, rule.Fail) {
			if rule.Fail.RetryAfter != "" {
				w.Header().Set("Retry-After", rule.Fail.RetryAfter)
			}
			httpError(w, rule.Fail.Status, "scripted failure")
			return
		}
		if rule.Fail != nil && len(calls) == 0 && rule.Say == "" && !rule.NoChoices {
			continue // a failure rule that has failed its times lets the next rule answer
		}
		s.answer(w, req.Model, rule, calls, d, len(body))
		return
	}
	s.answer(w, req.Model, Rule{Say: "(the script has no rule for this request)"}, nil, d, len(body))
}

// failing reports whether rule i still fails, counting this request.
func (s *Server) failing(i int, f *Fail) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Times > 0 && s.failed[i] >= f.Times {
		return false
	}
	s.failed[i]++
	return true
}

// matches checks rule's conditions and resolves its calls' tool names.
func (s *Server) matches(rule Rule, msgs []message, offered []string) ([]string, bool) {
	if len(msgs) == 0 {
		return nil, false
	}
	last := msgs[len(msgs)-1]
	w := rule.When
	if w.Last != "" && last.Role != w.Last {
		return nil, false
	}
	if w.Offered != "" && firstMatch(w.Offered, offered) == "" {
		return nil, false
	}
	if w.NotOffered != "" && firstMatch(w.NotOffered, offered) != "" {
		return nil, false
	}
	if w.After != "" {
		if last.Role != "tool" {
			return nil, false
		}
		if ok, _ := path.Match(w.After, answeredTool(msgs, last.ToolCallID)); !ok {
			return nil, false
		}
	}
	if w.Contains != "" && !strings.Contains(last.text(), w.Contains) {
		return nil, false
	}
	names := make([]string, len(rule.Calls))
	for i, c := range rule.Calls {
		names[i] = firstMatch(c.Tool, offered)
		if names[i] == "" {
			if !c.Force {
				return nil, false
			}
			names[i] = c.Tool
		}
	}
	return names, true
}

// answeredTool is the name of the call id answers.
func answeredTool(msgs []message, id string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		for _, tc := range msgs[i].ToolCalls {
			if tc.ID == id {
				return tc.Function.Name
			}
		}
	}
	return ""
}

// firstMatch is the first offered name glob matches.
func firstMatch(glob string, offered []string) string {
	for _, n := range offered {
		if ok, _ := path.Match(glob, n); ok {
			return n
		}
	}
	return ""
}

// data builds the template data from the conversation.
func data(msgs []message) Data {
	var d Data
	for _, m := range msgs {
		switch m.Role {
		case "user":
			d.User = m.text()
		case "tool":
			d.Result = m.text()
			d.Results = append(d.Results, d.Result)
		case "assistant":
			d.Turn++
		}
	}
	d.Hit = firstHit(d.Result)
	return d
}

// answer writes the chat completion of rule.
func (s *Server) answer(w http.ResponseWriter, model string, rule Rule, names []string, d Data, prompt int) {
	if rule.NoChoices {
		writeJSON(w, map[string]any{"id": "chatcmpl-none", "object": "chat.completion", "created": time.Now().Unix(), "model": model, "choices": []any{}})
		return
	}
	text, err := render(rule.Say, d)
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	var calls []toolCall
	for i, c := range rule.Calls {
		args := c.RawArguments
		if args == "" {
			v, err := expand(c.Arguments, d)
			if err != nil {
				httpError(w, http.StatusInternalServerError, err.Error())
				return
			}
			if v == nil {
				v = map[string]any{}
			}
			b, err := json.Marshal(v)
			if err != nil {
				httpError(w, http.StatusInternalServerError, "encode arguments: "+err.Error())
				return
			}
			args = string(b)
		}
		s.mu.Lock()
		s.calls++
		n := s.calls
		s.mu.Unlock()
		tc := toolCall{ID: "call_" + strconv.Itoa(n), Type: "function"}
		tc.Function.Name, tc.Function.Arguments = names[i], args
		calls = append(calls, tc)
	}
	completion := len(text)
	for _, c := range calls {
		completion += len(c.Function.Name) + len(c.Function.Arguments)
	}
	msg := map[string]any{"role": "assistant", "content": text}
	finish := "stop"
	if len(calls) > 0 {
		msg["tool_calls"] = calls
		finish = "tool_calls"
		if text == "" {
			msg["content"] = nil
		}
	}
	writeJSON(w, map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", d.Turn), "object": "chat.completion", "created": time.Now().Unix(), "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		// Tokens at four bytes each, as a tokenizer roughly counts them.
		"usage": map[string]any{"prompt_tokens": prompt / 4, "completion_tokens": completion / 4, "total_tokens": prompt/4 + completion/4},
	})
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{"id": s.script.Model, "object": "model", "owned_by": "handoff"}}})
}

func (s *Server) debug(w http.ResponseWriter, _ *http.Request) {
	reqs := s.Requests()
	writeJSON(w, map[string]any{"count": len(reqs), "requests": reqs})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// httpError answers in the OpenAI error shape.
func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "scripted_error"}})
}
