package model_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/handoff-a2a/handoff/internal/model"
)

// referenceSearch is the ranking as README states it, written the plain way (every tool split
// into words, every hit sorted): Search must agree with it.
func referenceSearch(tools []model.Tool, query string) []string {
	terms := func(s string) []string {
		return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	}
	type scored struct {
		name  string
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
		for _, w := range terms(query) {
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
			hits = append(hits, scored{t.Name, s})
		}
	}
	slices.SortFunc(hits, func(a, b scored) int { return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.name, b.name)) })
	out := []string{}
	for i := 0; i < len(hits) && i < 5; i++ {
		out = append(out, hits[i].name)
	}
	return out
}

func TestSearchAgreesWithTheStatedRanking(t *testing.T) {
	words := []string{"Weather", "forecast", "NOTE", "add", "a", "Ünïcode", "straße", "KELVIN", "K", "İstanbul", "x1", "42"}
	seps := []string{" ", "_", "__", ", ", "-", ".", "é "}
	rng := rand.New(rand.NewPCG(1, 2))
	phrase := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteString(seps[rng.IntN(len(seps))])
		}
		return b.String()
	}
	var tools []model.Tool
	for i := range 300 {
		tl := model.Tool{Name: fmt.Sprintf("s%d__%s", i, phrase(2)), Description: phrase(rng.IntN(8))}
		for range rng.IntN(3) {
			tl.Tags = append(tl.Tags, phrase(1))
		}
		tools = append(tools, tl)
	}
	for range 500 {
		q := phrase(1 + rng.IntN(5))
		var got []string
		for _, h := range model.Search(tools, q) {
			got = append(got, h.Name)
		}
		if want := referenceSearch(tools, q); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("Search(%q) = %q, want %q", q, got, want)
		}
	}
}

// gadgets is the catalog curve's tools: every one matches the gadget query.
func gadgets(n int) []model.Tool {
	tools := make([]model.Tool, n)
	for i := range tools {
		tools[i] = model.Tool{Name: fmt.Sprintf("gadgets__gadget_%05d", i), Description: fmt.Sprintf("Gadget number %d of the workshop: reports its serial.", i)}
	}
	return tools
}

// BenchmarkSearch is one search_tools query matching every tool, at 10 and 5,000 tools.
func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{10, 5000} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			tools := gadgets(n)
			for b.Loop() {
				if len(model.Search(tools, "report the serial of gadget 1234")) == 0 {
					b.Fatal("found nothing")
				}
			}
		})
		// The split-and-sort ranking Search replaced, as the same run's baseline.
		b.Run(fmt.Sprintf("reference/tools=%d", n), func(b *testing.B) {
			tools := gadgets(n)
			for b.Loop() {
				if len(referenceSearch(tools, "report the serial of gadget 1234")) == 0 {
					b.Fatal("found nothing")
				}
			}
		})
	}
}
