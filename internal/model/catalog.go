package model

import (
	"cmp"
	"context"
	"encoding/json"
	"path"
	"slices"
	"strings"
	"unicode"
)

// Tool is one tool the caller may use: a catalog tool (server__tool) or a delegate skill.
type Tool struct {
	// Name is the catalog name (server__tool), or a delegate skill's id.
	Name string `json:"name"`
	// Description is the tool's description, offered to the model.
	Description string `json:"description,omitempty"`
	// InputSchema is the JSON Schema of the tool's arguments; empty takes any object.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// Tags are keywords search_tools ranks by (a word in a tag counts 2).
	Tags []string `json:"tags,omitempty"`
	// Risk is the local contract's classification ("low", "high"), shown to no model.
	Risk string `json:"risk,omitempty"`
	// ReadOnly: the local contract says the tool only reads.
	ReadOnly bool `json:"read_only,omitempty"`
	// Delegate: the tool is a local delegate skill, visible by the skill's delegates list.
	Delegate bool `json:"delegate,omitempty"`
}

// Snapshot is one version of the tools the caller may use, already intersected with the
// caller's entitlements.
type Snapshot struct {
	// Version is the MCP catalog snapshot's version; empty without MCP servers.
	Version string
	// Tools are the catalog's tools, then the delegate skills.
	Tools []Tool
}

// Catalog resolves the current snapshot.
type Catalog interface {
	Snapshot(ctx context.Context) (Snapshot, error)
}

// Visible keeps the tools of s that globs (catalog tools) or delegates (delegate tools) name,
// sorted by name, each with the reason it is visible. Anything else is invisible, whatever
// the model later asks.
func Visible(tools []Tool, globs, delegates []string) ([]Tool, []Visibility) {
	var vis []Tool
	var why []Visibility
	for _, t := range tools {
		reason := ""
		if t.Delegate {
			if slices.Contains(delegates, t.Name) {
				reason = "delegate " + t.Name + " is listed in delegates"
			}
		} else {
			for _, g := range globs {
				if ok, _ := path.Match(g, t.Name); ok {
					reason = "matches tools glob " + g
					break
				}
			}
		}
		if reason != "" {
			vis = append(vis, t)
			why = append(why, Visibility{Name: t.Name, Reason: reason})
		}
	}
	slices.SortFunc(vis, func(a, b Tool) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(why, func(a, b Visibility) int { return cmp.Compare(a.Name, b.Name) })
	return vis, why
}

// UnmatchedGlobs returns the globs that match no tool of tools, for a startup warning (servers
// come and go, so it is not an error).
func UnmatchedGlobs(tools []Tool, globs []string) []string {
	var out []string
	for _, g := range globs {
		hit := false
		for _, t := range tools {
			if ok, _ := path.Match(g, t.Name); ok && !t.Delegate {
				hit = true
				break
			}
		}
		if !hit {
			out = append(out, g)
		}
	}
	return out
}

// EstimateTokens is the size the tools' definitions add to a request, at four bytes a token.
func EstimateTokens(tools []Tool) int {
	n := 0
	for _, t := range tools {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema) + 40 // 40: the wrapping JSON
	}
	return n / 4
}

// SearchHit is one search_tools result: the full definition, so that no separate describe
// step is needed.
type SearchHit struct {
	// Name is the tool's name, for call_tool.
	Name string `json:"name"`
	// Description is the tool's description.
	Description string `json:"description,omitempty"`
	// Tags are the tool's tags.
	Tags []string `json:"tags,omitempty"`
	// InputSchema is the JSON Schema of the tool's arguments.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// maxSearchHits bounds a search_tools answer.
const maxSearchHits = 5

// Search ranks tools (the visible set only) against query: a query word in the name counts
// 3, in a tag 2, in the description 1; ties go by name. Tools matching no word are left out.
func Search(tools []Tool, query string) []SearchHit {
	words := terms(query)
	type scored struct {
		t     Tool
		score int
	}
	var hits []scored
	for _, t := range tools {
		name, desc := terms(t.Name), terms(t.Description)
		var tags []string
		for _, tag := range t.Tags {
			tags = append(tags, terms(tag)...)
		}
		s := 0
		for _, w := range words {
			switch {
			case slices.Contains(name, w):
				s += 3
			case slices.Contains(tags, w):
				s += 2
			case slices.Contains(desc, w):
				s++
			}
		}
		if s > 0 {
			hits = append(hits, scored{t, s})
		}
	}
	slices.SortFunc(hits, func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.t.Name, b.t.Name))
	})
	out := []SearchHit{}
	for i, h := range hits {
		if i == maxSearchHits {
			break
		}
		out = append(out, SearchHit{Name: h.t.Name, Description: h.t.Description, Tags: h.t.Tags, InputSchema: h.t.InputSchema})
	}
	return out
}

// terms splits s into lowercase words of letters and digits; "notes__add_note" is
// [notes add note].
func terms(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}
