package model

import (
	"cmp"
	"context"
	"encoding/json"
	"path"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
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
// It costs one pass over the tools' text, allocating nothing per tool, and keeps only the best
// few hits rather than sorting all of them: at 5,000 tools a query matching every tool is a
// tenth of what splitting every tool into words and sorting the hits cost.
func Search(tools []Tool, query string) []SearchHit {
	q := newQueryTerms(query)
	var top [maxSearchHits]scoredTool
	n := 0
	for i := range tools {
		s := q.score(&tools[i])
		if s == 0 {
			continue
		}
		c := scoredTool{&tools[i], s}
		if n == maxSearchHits && !c.before(top[n-1]) {
			continue
		}
		if n < maxSearchHits {
			n++
		}
		j := n - 1
		for ; j > 0 && c.before(top[j-1]); j-- {
			top[j] = top[j-1]
		}
		top[j] = c
	}
	out := make([]SearchHit, 0, n)
	for _, h := range top[:n] {
		out = append(out, SearchHit{Name: h.t.Name, Description: h.t.Description, Tags: h.t.Tags, InputSchema: h.t.InputSchema})
	}
	return out
}

// scoredTool is a search hit before it is shown.
type scoredTool struct {
	t     *Tool
	score int
}

// before orders hits by score, then by name.
func (a scoredTool) before(b scoredTool) bool {
	return a.score > b.score || a.score == b.score && a.t.Name < b.t.Name
}

// queryTerms is a query's distinct words, how often each occurs (each occurrence counts), and
// scratch space for the best field each word was found in for the tool being scored.
type queryTerms struct {
	words []string
	times []int
	best  []int
}

func newQueryTerms(query string) *queryTerms {
	q := &queryTerms{}
	for _, w := range terms(query) {
		if i := slices.Index(q.words, w); i >= 0 {
			q.times[i]++
			continue
		}
		q.words = append(q.words, w)
		q.times = append(q.times, 1)
	}
	q.best = make([]int, len(q.words))
	return q
}

// score is t's score: for each query word, the weight of the best field holding it.
func (q *queryTerms) score(t *Tool) int {
	clear(q.best)
	q.field(t.Name, 3)
	for _, tag := range t.Tags {
		q.field(tag, 2)
	}
	q.field(t.Description, 1)
	s := 0
	for i, b := range q.best {
		s += b * q.times[i]
	}
	return s
}

// field records weight for every query word that is a word of s. An ASCII s is split in
// place, comparing without case; anything else goes through terms, whose lowercasing is
// Unicode's.
func (q *queryTerms) field(s string, weight int) {
	if !isASCII(s) {
		for _, w := range terms(s) {
			q.found(w, weight, false)
		}
		return
	}
	for i := 0; i < len(s); {
		if !isASCIIWordByte(s[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(s) && isASCIIWordByte(s[j]) {
			j++
		}
		q.found(s[i:j], weight, true)
		i = j
	}
}

// found records weight for the query word equal to w (an ASCII w compared without case).
func (q *queryTerms) found(w string, weight int, ascii bool) {
	for i, qw := range q.words {
		if q.best[i] >= weight || len(qw) != len(w) {
			continue
		}
		if ascii && asciiEqualFold(qw, w) || !ascii && qw == w {
			q.best[i] = weight
		}
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// isASCIIWordByte is terms' word rune (a letter or digit) for an ASCII byte.
func isASCIIWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// asciiEqualFold reports whether lower, already lowercase, is w lowercased; w is ASCII.
func asciiEqualFold(lower, w string) bool {
	for i := 0; i < len(w); i++ {
		c := w[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if lower[i] != c {
			return false
		}
	}
	return true
}

// terms splits s into lowercase words of letters and digits; "notes__add_note" is
// [notes add note].
func terms(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}
