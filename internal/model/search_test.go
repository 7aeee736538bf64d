package model_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/handoff-a2a/handoff/internal/model"
)

// manyTools is 200 visible tools (inventory__item_N), one weather tool among them, and a
// tempting forecast tool outside the globs.
func manyTools() []model.Tool {
	var tools []model.Tool
	for i := range 199 {
		tools = append(tools, model.Tool{Name: fmt.Sprintf("inventory__item_%03d", i), Description: "Look up stock of one warehouse item.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"sku":{"type":"string"}},"required":["sku"]}`)})
	}
	tools = append(tools,
		model.Tool{Name: "inventory__weather", Description: "Weather at the warehouse.", Tags: []string{"forecast"},
			InputSchema: json.RawMessage(`{"type":"object","properties":{"days":{"type":"integer"}},"required":["days"]}`)},
		model.Tool{Name: "secret__weather_forecast", Description: "Weather forecast weather weather.", Tags: []string{"weather", "forecast"},
			InputSchema: json.RawMessage(`{"type":"object"}`)},
	)
	return tools
}

func TestToolSearchOverTheBudget(t *testing.T) {
	client, srv := startModel(t, `
rules:
  - when: {last: user, offered: "search_tools"}
    calls: [{tool: search_tools, arguments: {query: "weather forecast"}}]
  - when: {last: tool, after: "search_tools"}
    calls: [{tool: call_tool, arguments: {name: "{{.Hit}}", arguments: {days: "2"}}}]
  - when: {last: tool, after: "call_tool"}
    say: "{{.Result}}"
`)
	c, s := &caller{}, &saver{}
	l := newLoop(t, client, manyTools(), c, s, model.SkillConfig{Tools: []string{"inventory__*"}, SchemaBudgetTokens: 500})
	conv, err := l.Start(t.Context(), "will it rain?")
	if err != nil {
		t.Fatal(err)
	}
	if conv.Mode != model.ModeSearch || len(conv.Visible) != 200 {
		t.Fatalf("mode %s with %d visible, want search over 200", conv.Mode, len(conv.Visible))
	}
	out, err := l.Run(t.Context(), conv, nil)
	if err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	for i, r := range reqs {
		if got := requestTools(t, r); !slices.Equal(got, []string{"search_tools", "call_tool"}) {
			t.Errorf("request %d offered %v, want only search_tools and call_tool", i, got)
		}
	}
	calls := c.got()
	if len(calls) != 1 || calls[0].Tool.Name != "inventory__weather" || string(calls[0].Arguments) != `{"days":2}` {
		t.Fatalf("calls %+v, want inventory__weather with days 2", calls)
	}
	if !strings.Contains(out.Text, `"days":2`) {
		t.Errorf("final text %q", out.Text)
	}
	saved := s.load(t)
	checkCorrelated(t, saved)
	for _, m := range saved.Messages {
		if m.Role == model.RoleTool && strings.Contains(m.Content, "secret__") {
			t.Errorf("a tool message names a tool outside the globs: %s", m.Content)
		}
	}
}

func TestToolSearchCannotReachOutsideTheGlobs(t *testing.T) {
	client, _ := startModel(t, `
rules:
  - when: {last: user}
    calls: [{tool: call_tool, arguments: {name: "secret__weather_forecast", arguments: {}}}]
  - when: {last: tool}
    say: "{{.Result}}"
`)
	c := &caller{}
	l := newLoop(t, client, manyTools(), c, &saver{}, model.SkillConfig{Tools: []string{"inventory__*"}, SchemaBudgetTokens: 500})
	conv, _ := l.Start(t.Context(), "forecast")
	out, err := l.Run(t.Context(), conv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.got()) != 0 || !strings.Contains(out.Text, "unavailable_tool") {
		t.Fatalf("calls %v, text %q: want the refusal", c.got(), out.Text)
	}
}

func TestSearchRanksTheVisibleSetOnly(t *testing.T) {
	vis, _ := model.Visible(manyTools(), []string{"inventory__*"}, nil)
	hits := model.Search(vis, "weather forecast")
	if len(hits) == 0 || hits[0].Name != "inventory__weather" || len(hits[0].InputSchema) == 0 {
		t.Fatalf("hits %+v, want inventory__weather first with its schema", hits)
	}
	for _, h := range hits {
		if !strings.HasPrefix(h.Name, "inventory__") {
			t.Errorf("search returned %s, outside the visible set", h.Name)
		}
	}
	if got := model.Search(vis, "zebra"); len(got) != 0 {
		t.Errorf("a query matching nothing returned %v", got)
	}
}

func TestModeIsChosenOncePerTask(t *testing.T) {
	// Under the budget at Start; the catalog grows past it later; the model still sees every
	// schema (the mode does not change mid-task).
	client, srv := startModel(t, `
rules:
  - when: {last: user}
    calls: [{tool: "notes__add", arguments: {text: "a"}}]
  - when: {last: tool}
    say: done
`)
	cat := &growing{small: notesTools, big: append(manyTools(), notesTools...)}
	ml, err := model.NewLoop(client, model.SkillConfig{Instructions: "x", Tools: []string{"notes__*", "inventory__*"}, SchemaBudgetTokens: 500})
	if err != nil {
		t.Fatal(err)
	}
	l := bound{ml, model.Env{Catalog: cat, Caller: &caller{}, Saver: &saver{}}}
	conv, _ := l.Start(t.Context(), "go")
	if _, err := l.Run(t.Context(), conv, nil); err != nil {
		t.Fatal(err)
	}
	if conv.Mode != model.ModeAll {
		t.Fatalf("mode %s", conv.Mode)
	}
	for i, r := range srv.Requests() {
		if got := requestTools(t, r); slices.Contains(got, "search_tools") {
			t.Errorf("request %d switched to tool search", i)
		}
	}
}

func TestVisibleByGlobsAndDelegates(t *testing.T) {
	tools := append(slices.Clone(notesTools),
		model.Tool{Name: "refund", Delegate: true, Description: "Refund an order through the verified peer."},
		model.Tool{Name: "notes__evil", Delegate: true}, // a delegate is visible by name only, not by glob
	)
	vis, why := model.Visible(tools, []string{"notes__a*", "mail__*"}, []string{"refund"})
	var names []string
	for _, v := range vis {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, []string{"mail__send", "notes__add", "refund"}) {
		t.Fatalf("visible %v", names)
	}
	want := []model.Visibility{
		{Name: "mail__send", Reason: "matches tools glob mail__*"},
		{Name: "notes__add", Reason: "matches tools glob notes__a*"},
		{Name: "refund", Reason: "delegate refund is listed in delegates"},
	}
	if !slices.Equal(why, want) {
		t.Errorf("reasons %v", why)
	}
	if got := model.UnmatchedGlobs(tools, []string{"notes__*", "calendar__*"}); !slices.Equal(got, []string{"calendar__*"}) {
		t.Errorf("unmatched %v", got)
	}
}
