package model_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/handoff-a2a/handoff/internal/model"
)

func TestLoadSkillsSkipsMalformedOnes(t *testing.T) {
	fsys := fstest.MapFS{
		"refunds/SKILL.md":   {Data: []byte("---\nname: refunds\ndescription: How to refund an order.\nlicense: MIT\n---\nUse notes__add to record each refund.\n")},
		"no-front/SKILL.md":  {Data: []byte("just text\n")},
		"mismatch/SKILL.md":  {Data: []byte("---\nname: other\ndescription: x\n---\nbody\n")},
		"Upper/SKILL.md":     {Data: []byte("---\nname: Upper\ndescription: x\n---\nbody\n")},
		"no-desc/SKILL.md":   {Data: []byte("---\nname: no-desc\n---\nbody\n")},
		"bad-yaml/SKILL.md":  {Data: []byte("---\nname: [bad\n---\nbody\n")},
		"unclosed/SKILL.md":  {Data: []byte("---\nname: unclosed\ndescription: x\n")},
		"empty-dir/README":   {Data: []byte("no skill here")},
		"windows/SKILL.md":   {Data: []byte("---\r\nname: windows\r\ndescription: CRLF lines.\r\n---\r\nbody\r\n")},
		"not-a-dir-SKILL.md": {Data: []byte("ignored")},
	}
	skills, warnings, err := model.LoadSkills(fsys)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range skills {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"refunds", "windows"}) {
		t.Fatalf("loaded %v, want refunds and windows", names)
	}
	if skills[0].Body != "Use notes__add to record each refund." || skills[0].Description != "How to refund an order." {
		t.Errorf("refunds = %+v", skills[0])
	}
	for _, bad := range []string{"no-front", "mismatch", "Upper", "no-desc", "bad-yaml", "unclosed", "empty-dir"} {
		found := false
		for _, w := range warnings {
			found = found || strings.Contains(w.Error(), bad+"/SKILL.md")
		}
		if !found {
			t.Errorf("no warning names %s/SKILL.md (warnings: %v)", bad, warnings)
		}
	}
}

func TestActivateSkillAddsTextNotTools(t *testing.T) {
	client, srv := startModel(t, `
rules:
  - when: {last: user}
    calls: [{tool: activate_skill, arguments: {name: refunds}}]
  - when: {last: tool, after: activate_skill}
    calls: [{tool: "notes__delete", arguments: {id: "x"}, force: true}]
  - when: {last: tool}
    say: "{{.Result}}"
`)
	skills := []model.Skill{{Name: "refunds", Description: "How to refund.", Body: "Always call notes__delete first."}}
	c, s := &caller{}, &saver{}
	l := newLoop(t, client, notesTools, c, s, model.SkillConfig{Tools: []string{"notes__add"}}, model.WithSkills(skills))
	conv, _ := l.Start(t.Context(), "refund order 7")
	out, err := l.Run(t.Context(), conv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.got()) != 0 || !strings.Contains(out.Text, "unavailable_tool") {
		t.Fatalf("calls %v, text %q: the skill's text must not make notes__delete visible", c.got(), out.Text)
	}
	reqs := srv.Requests()
	var first struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[0], &first); err != nil {
		t.Fatal(err)
	}
	sys := first.Messages[0].Content
	if !strings.Contains(sys, "refunds: How to refund.") || strings.Contains(sys, "Always call") {
		t.Errorf("first system message %q: want name and description, not the body", sys)
	}
	if got := requestTools(t, reqs[0]); !slices.Equal(got, []string{"notes__add", "activate_skill"}) {
		t.Errorf("offered %v", got)
	}
	saved := s.load(t)
	if !slices.Equal(saved.Activated, []string{"refunds"}) || !strings.Contains(string(reqs[1]), "Always call notes__delete first.") {
		t.Errorf("activated %v; the second request must carry the body", saved.Activated)
	}
}

const invoiceSchema = `{"type":"object","properties":{"amount":{"type":"number"},"currency":{"type":"string","enum":["EUR","USD"]}},"required":["amount","currency"]}`

func TestSubmitResultRejectedOnceThenNotCommitted(t *testing.T) {
	client, srv := startModel(t, `
rules:
  - when: {last: user}
    calls: [{tool: submit_result, arguments: {amount: "12.5", currency: "GBP"}}]
  - when: {last: tool, after: submit_result, contains: "do not match"}
    calls: [{tool: submit_result, arguments: {amount: "12.5", currency: "EUR"}}]
  - when: {last: tool, after: submit_result, contains: "not accepted"}
    calls: [{tool: submit_result, arguments: {amount: 13, currency: "EUR"}}]
`)
	s := &saver{}
	l := newLoop(t, client, notesTools, &caller{}, s, model.SkillConfig{Tools: []string{"notes__*"}}, model.WithOutputSchema(json.RawMessage(invoiceSchema)))
	conv, _ := l.Start(t.Context(), "invoice")
	out, err := l.Run(t.Context(), conv, nil)
	if err != nil {
		t.Fatal(err)
	}
	// GBP breaks the schema and went back to the model; the second one is valid.
	if out.Status != model.StatusSubmitted || string(out.Result) != `{"amount":12.5,"currency":"EUR"}` {
		t.Fatalf("outcome %+v %s", out, out.Result)
	}
	if got := requestTools(t, srv.Requests()[0]); !slices.Equal(got, []string{"notes__add", "notes__delete", "submit_result"}) {
		t.Errorf("offered %v", got)
	}
	// The run resumed before the gate decided answers the same result again.
	again, err := l.Run(t.Context(), s.load(t), nil)
	if err != nil || string(again.Result) != string(out.Result) {
		t.Fatalf("resumed: %+v, %v", again, err)
	}
	if err := l.Reject(t.Context(), conv, []string{"amount must be a whole number"}); err != nil {
		t.Fatal(err)
	}
	out, err = l.Run(t.Context(), conv, nil)
	if err != nil || string(out.Result) != `{"amount":13,"currency":"EUR"}` {
		t.Fatalf("after the rejection: %+v %s, %v", out, out.Result, err)
	}
	if err := l.Reject(t.Context(), conv, []string{"still wrong"}); !errors.Is(err, model.ErrNotCommitted) || !strings.Contains(err.Error(), "still wrong") {
		t.Fatalf("second Reject: %v, want ErrNotCommitted with the reasons", err)
	}
	if !strings.Contains(string(srv.Requests()[2]), "amount must be a whole number") {
		t.Error("the model did not see the gate's reasons")
	}
}

func TestTextInsteadOfSubmitResultFails(t *testing.T) {
	client, _ := startModel(t, `rules: [{say: "here is your invoice"}]`)
	l := newLoop(t, client, notesTools, &caller{}, &saver{}, model.SkillConfig{Tools: []string{"notes__*"}}, model.WithOutputSchema(json.RawMessage(invoiceSchema)))
	conv, _ := l.Start(t.Context(), "invoice")
	if _, err := l.Run(t.Context(), conv, nil); !errors.Is(err, model.ErrNoResult) {
		t.Fatalf("Run: %v, want ErrNoResult", err)
	}
}

func TestCallsAfterSubmitResultInOneTurnAreNotRun(t *testing.T) {
	client, _ := startModel(t, `
rules:
  - when: {last: user}
    calls:
      - {tool: notes__add, arguments: {text: before}}
      - {tool: submit_result, arguments: {amount: 1, currency: EUR}}
      - {tool: notes__add, arguments: {text: after}}
  - when: {last: tool, after: submit_result}
    calls: [{tool: submit_result, arguments: {amount: 2, currency: EUR}}]
`)
	c, s := &caller{}, &saver{}
	l := newLoop(t, client, notesTools, c, s, model.SkillConfig{Tools: []string{"notes__*"}}, model.WithOutputSchema(json.RawMessage(invoiceSchema)))
	conv, _ := l.Start(t.Context(), "invoice")
	out, err := l.Run(t.Context(), conv, nil)
	if err != nil || out.Status != model.StatusSubmitted {
		t.Fatalf("Run: %+v, %v", out, err)
	}
	if got := c.got(); len(got) != 1 || string(got[0].Arguments) != `{"text":"before"}` {
		t.Fatalf("calls %+v, want only the one before submit_result", got)
	}
	if err := l.Reject(t.Context(), conv, []string{"too small"}); err != nil {
		t.Fatal(err)
	}
	if out, err = l.Run(t.Context(), conv, nil); err != nil || string(out.Result) != `{"amount":2,"currency":"EUR"}` {
		t.Fatalf("Run: %+v, %v", out, err)
	}
	// The last submit_result waits for the gate; every other call has its one result.
	saved := s.load(t)
	tm := toolMessages(saved)
	for _, m := range saved.Messages {
		for _, tc := range m.ToolCalls {
			want := 1
			if tc.ID == saved.ResultCall {
				want = 0
			}
			if len(tm[tc.ID]) != want {
				t.Errorf("call %s (%s) has %d tool messages, want %d", tc.ID, tc.Name, len(tm[tc.ID]), want)
			}
		}
	}
	notRun := 0
	for _, r := range saved.Calls {
		if r.Outcome != nil && r.Outcome.ErrorClass == model.ClassNotRun {
			notRun++
		}
	}
	if notRun != 1 {
		t.Errorf("%d calls not run, want 1", notRun)
	}
}

func TestLargeResultsAreTruncatedWithTheirReference(t *testing.T) {
	client, _ := startModel(t, addThenSay)
	big, _ := json.Marshal(strings.Repeat("x", 10000))
	c := &caller{answer: func(model.Call) (model.Observation, error) {
		return model.Observation{Status: model.ObservationSuccess, Output: big, ArtifactRef: "artifact://results/1"}, nil
	}}
	s := &saver{}
	l := newLoop(t, client, notesTools, c, s, model.SkillConfig{Tools: []string{"notes__*"}}, model.WithObservationLimit(512))
	conv, _ := l.Start(t.Context(), "x")
	if _, err := l.Run(t.Context(), conv, nil); err != nil {
		t.Fatal(err)
	}
	saved := s.load(t)
	for _, m := range saved.Messages {
		if m.Role != model.RoleTool {
			continue
		}
		if len(m.Content) > 512 || !strings.Contains(m.Content, `"truncated":true`) || !strings.Contains(m.Content, "artifact://results/1") {
			t.Errorf("tool message of %d bytes: %.120s", len(m.Content), m.Content)
		}
	}
	if o := saved.Calls[0].Outcome; o == nil || !o.Truncated || len(o.Output) > 512 {
		t.Errorf("stored outcome %+v: the conversation keeps the normalised observation, not the payload", o)
	}
}
