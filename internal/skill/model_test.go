package skill

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/internal/model"
	"github.com/handoff-a2a/handoff/mcp"
)

// TestModelSaverRedacts: the stored conversation masks the arguments a
// tool's contract redacts, in direct calls, in call_tool's wrapped calls
// and in the call records, and leaves the running conversation as it was.
func TestModelSaverRedacts(t *testing.T) {
	state, err := OpenBoltState(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	s := &modelSaver{state: state, key: "model/t1", ended: map[string]bool{},
		redact: func(tool string) []string {
			if tool == "notes__write_note" {
				return []string{"text"}
			}
			return nil
		}}
	c := &model.Conversation{Messages: []model.Message{
		{Role: model.RoleUser, Content: "save it"},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
			{ID: "c1", Name: "notes__write_note", Arguments: `{"name":"n","text":"hunter2"}`},
			{ID: "c2", Name: model.NameCallTool, Arguments: `{"name":"notes__write_note","arguments":{"name":"m","text":"hunter3"}}`},
			{ID: "c3", Name: "notes__read_note", Arguments: `{"name":"hunter4"}`},
		}},
	}, Calls: []model.CallRecord{{ID: "c1", Name: "notes__write_note", Arguments: json.RawMessage(`{"name":"n","text":"hunter2"}`)}}}
	if err := s.Save(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	stored, err := state.Load(t.Context(), "model/t1")
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"hunter2", "hunter3"} {
		if strings.Contains(string(stored), secret) {
			t.Errorf("the stored conversation holds %s: %s", secret, stored)
		}
	}
	if !strings.Contains(string(stored), "hunter4") || strings.Count(string(stored), mcp.Redacted) != 3 {
		t.Errorf("stored %s: want the three redacted values masked and the rest kept", stored)
	}
	if c.Messages[1].ToolCalls[0].Arguments != `{"name":"n","text":"hunter2"}` || string(c.Calls[0].Arguments) != `{"name":"n","text":"hunter2"}` {
		t.Errorf("the running conversation changed: %+v", c)
	}
}

// TestModelCallerRefusesPlaceholder: a call whose redacted argument is the
// placeholder (all a restart left of it) is refused, never run.
func TestModelCallerRefusesPlaceholder(t *testing.T) {
	m, err := mcp.NewManager(nil)
	if err != nil {
		t.Fatal(err)
	}
	audit, err := mcp.OpenBoltAudit(filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer audit.Close()
	p, err := mcp.NewPipeline(m, []mcp.Contract{{Tool: "notes__write_note", Effect: mcp.EffectWrite, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone, Redact: []string{"text"}}}, audit)
	if err != nil {
		t.Fatal(err)
	}
	x := NewModel("m", ModelSpec{}, &MCP{Manager: m, Pipeline: p, Audit: audit}, nil, nil)
	k := &modelCaller{x: x, caps: &Caps{tools: x.tools, ec: &a2asrv.ExecutorContext{TaskID: "t1"}}}
	obs, err := k.Call(t.Context(), model.Call{ID: "c1", Tool: model.Tool{Name: "notes__write_note"},
		Arguments: json.RawMessage(`{"name":"n","text":"` + mcp.Redacted + `"}`)})
	if err != nil || obs.ErrorClass != model.ClassValidationFailed || !strings.Contains(obs.Error, "not kept across a restart") {
		t.Fatalf("Call = %+v, %v; want refused as validation_failed", obs, err)
	}
	recs, err := audit.List(t.Context(), mcp.AuditFilter{})
	if err != nil || len(recs) != 0 {
		t.Errorf("audit %v, %v: the refused call reached the pipeline", recs, err)
	}
}
