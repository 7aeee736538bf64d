package model_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/handoff-a2a/handoff/examples/scriptedmodel/script"
	"github.com/handoff-a2a/handoff/internal/model"
)

// startModel serves a script over real HTTP on 127.0.0.1 and returns a client of it.
func startModel(t testing.TB, yamlScript string) (*model.Client, *script.Server) {
	t.Helper()
	s, err := script.Parse([]byte(yamlScript))
	if err != nil {
		t.Fatalf("parse script: %v", err)
	}
	srv := script.NewServer(s)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	zero := 0
	return model.NewClient(model.Endpoint{Name: "scripted", BaseURL: hs.URL + "/v1", Model: "scripted", MaxRetries: &zero}, "", hs.Client()), srv
}

// catalog is a fixed snapshot.
type catalog struct {
	version string
	tools   []model.Tool
}

func (c catalog) Snapshot(context.Context) (model.Snapshot, error) {
	return model.Snapshot{Version: c.version, Tools: c.tools}, nil
}

// caller records the calls it runs and answers with answer (or a success echoing the
// arguments).
type caller struct {
	mu     sync.Mutex
	calls  []model.Call
	answer func(model.Call) (model.Observation, error)
}

func (c *caller) Call(_ context.Context, call model.Call) (model.Observation, error) {
	c.mu.Lock()
	c.calls = append(c.calls, call)
	c.mu.Unlock()
	if c.answer != nil {
		return c.answer(call)
	}
	return model.Observation{Status: model.ObservationSuccess, Output: call.Arguments}, nil
}

func (c *caller) got() []model.Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]model.Call(nil), c.calls...)
}

// saver keeps the last saved conversation as JSON, as a task store would.
type saver struct {
	mu    sync.Mutex
	last  []byte
	saves int
}

func (s *saver) Save(_ context.Context, c *model.Conversation) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.last, s.saves = b, s.saves+1
	s.mu.Unlock()
	return nil
}

// load returns the last saved conversation, decoded afresh.
func (s *saver) load(t testing.TB) *model.Conversation {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var c model.Conversation
	if err := json.Unmarshal(s.last, &c); err != nil {
		t.Fatalf("decode saved conversation: %v", err)
	}
	return &c
}

// notesTools is a small catalog: two notes tools and one of another server.
var notesTools = []model.Tool{
	{Name: "notes__add", Description: "Add a note.", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"count":{"type":"integer"}},"required":["text"],"additionalProperties":false}`)},
	{Name: "notes__delete", Description: "Delete a note.", InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`)},
	{Name: "mail__send", Description: "Send mail.", InputSchema: json.RawMessage(`{"type":"object"}`)},
}

// requestTools lists the tool names a recorded request offered.
func requestTools(t testing.TB, body json.RawMessage) []string {
	t.Helper()
	var req struct {
		Tools []struct {
			Function struct{ Name string } `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range req.Tools {
		names = append(names, tl.Function.Name)
	}
	return names
}

// toolMessages returns the tool messages of c by call id.
func toolMessages(c *model.Conversation) map[string][]string {
	out := map[string][]string{}
	for _, m := range c.Messages {
		if m.Role == model.RoleTool {
			out[m.ToolCallID] = append(out[m.ToolCallID], m.Content)
		}
	}
	return out
}

// checkCorrelated fails unless every tool call of c has exactly one tool message.
func checkCorrelated(t testing.TB, c *model.Conversation) {
	t.Helper()
	tm := toolMessages(c)
	n := 0
	for _, m := range c.Messages {
		for _, tc := range m.ToolCalls {
			n++
			if len(tm[tc.ID]) != 1 {
				t.Errorf("call %s (%s) has %d tool messages, want 1", tc.ID, tc.Name, len(tm[tc.ID]))
			}
		}
	}
	if len(tm) != n {
		t.Errorf("%d tool messages answer %d calls", len(tm), n)
	}
}

// growing is a catalog whose first snapshot is small and every later one big.
type growing struct {
	mu         sync.Mutex
	n          int
	small, big []model.Tool
}

func (g *growing) Snapshot(context.Context) (model.Snapshot, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
	if g.n == 1 {
		return model.Snapshot{Version: "v1", Tools: g.small}, nil
	}
	return model.Snapshot{Version: "v2", Tools: g.big}, nil
}
