package policy

import (
	"fmt"
	"strings"
)

// Finding is one thing [Check] found wrong with a valid rule set.
type Finding struct {
	// Rule is the id of the rule at fault.
	Rule string `json:"rule"`
	// Problem is conflict, never_matches or never_decides.
	Problem string `json:"problem"`
	// Msg says what, naming the other rule when there is one.
	Msg string `json:"msg"`
}

// Tool is what [Check] knows of one tool the rules may be about: its catalog name (or a
// contract's glob) and the resource kinds its contract extracts.
type Tool struct {
	// Name is a catalog name or a contract's glob.
	Name string
	// Kinds are the kinds of the resources its contract names.
	Kinds []Kind
}

// Check reports, for a policy that compiles, the rules of one layer that overlap with
// different verdicts (conflict), the rules that can match no call of the given tools
// (never_matches: no tool matches the tools globs of an allow or ask rule, or no tool a rule
// names has a contract that extracts the resource kind it needs), and the rules a higher rule without a condition always beats (never_decides). An
// overlap is judged on the fields alone: two rules with When conditions are reported when
// they may overlap. tools may be nil, which skips never_matches.
func Check(p *Policy, tools []Tool) []Finding {
	var out []Finding
	for l := LayerImmutable; l <= LayerDefault; l++ {
		rs := p.byLayer[l]
		for i, a := range rs {
			for _, b := range rs[i+1:] {
				if a.verdict != b.verdict && overlaps(a, b) {
					out = append(out, Finding{Rule: b.ID, Problem: "conflict",
						Msg: fmt.Sprintf("layer %s: %s says %s and %s says %s of calls both match (%s wins)", l, a.ID, a.verdict, b.ID, b.verdict, Ask)})
				}
			}
		}
	}
	if tools != nil {
		for _, r := range p.rules {
			if msg := neverMatches(r, tools); msg != "" {
				out = append(out, Finding{Rule: r.ID, Problem: "never_matches", Msg: msg})
			}
		}
	}
	for _, low := range p.rules {
		for _, high := range p.rules {
			if high.layer < low.layer && high.When == "" && covers(high, low) {
				out = append(out, Finding{Rule: low.ID, Problem: "never_decides",
					Msg: fmt.Sprintf("every call it matches is decided first by %s (layer %s, %s)", high.ID, high.layer, high.verdict)})
				break
			}
		}
	}
	return out
}

func neverMatches(r *compiled, tools []Tool) string {
	var kinds []Kind
	if len(r.paths) > 0 {
		kinds = append(kinds, KindPath)
	}
	if len(r.urls) > 0 {
		kinds = append(kinds, KindURL)
	}
	if len(r.IDs) > 0 {
		kinds = append(kinds, KindID)
	}
	any := false
	for _, t := range tools {
		if len(r.Tools) > 0 && !globsOverlap(r.Tools, []string{t.Name}) {
			continue
		}
		ok := true
		for _, k := range kinds {
			if !hasKind(t.Kinds, k) {
				ok = false
			}
		}
		if ok {
			any = true
			break
		}
	}
	if any {
		return ""
	}
	if len(kinds) > 0 {
		return fmt.Sprintf("no tool it names has a contract that extracts %s resources", kindList(kinds))
	}
	if r.verdict == Deny {
		return "" // a deny may guard tools a server adds later: the catalog is not the config
	}
	return fmt.Sprintf("its tools %v match no configured tool or contract", r.Tools)
}

func hasKind(ks []Kind, k Kind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

func kindList(ks []Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, " and ")
}

// overlaps reports whether some call may match both rules.
func overlaps(a, b *compiled) bool {
	return globsOverlap(a.Tools, b.Tools) && globsOverlap(a.Principals, b.Principals) &&
		globsOverlap(a.Tenants, b.Tenants) && globsOverlap(a.Skills, b.Skills) &&
		listsOverlap(a.Effects, b.Effects) && listsOverlap(a.Risks, b.Risks) &&
		prefixesOverlap(a.paths, b.paths, pathUnder) && prefixesOverlap(a.urls, b.urls, urlUnder) &&
		listsOverlap(a.IDs, b.IDs)
}

// covers reports whether every call low matches also matches high, judged on the fields.
func covers(high, low *compiled) bool {
	return globsCover(high.Tools, low.Tools) && globsCover(high.Principals, low.Principals) &&
		globsCover(high.Tenants, low.Tenants) && globsCover(high.Skills, low.Skills) &&
		listCovers(high.Effects, low.Effects) && listCovers(high.Risks, low.Risks) &&
		len(high.paths) == 0 && len(high.urls) == 0 && len(high.IDs) == 0
}

func globsCover(high, low []string) bool {
	if len(high) == 0 {
		return true
	}
	if len(low) == 0 {
		return false
	}
	for _, l := range low {
		if !anyGlob(high, l) { // a literal low entry, or a glob high matches as text
			return false
		}
	}
	return true
}

func listCovers(high, low []string) bool {
	if len(high) == 0 {
		return true
	}
	if len(low) == 0 {
		return false
	}
	for _, l := range low {
		if !anyExact(high, l) {
			return false
		}
	}
	return true
}

func listsOverlap(a, b []string) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	for _, x := range a {
		if anyExact(b, x) {
			return true
		}
	}
	return false
}

func prefixesOverlap(a, b []string, under func(prefix, v string) bool) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	for _, x := range a {
		for _, y := range b {
			if under(x, y) || under(y, x) {
				return true
			}
		}
	}
	return false
}

// globsOverlap reports whether some string may match a glob of each list: exactly when one
// matches the other as text, or when both have stars and their fixed heads and tails agree.
func globsOverlap(a, b []string) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	for _, x := range a {
		for _, y := range b {
			if globPairOverlaps(x, y) {
				return true
			}
		}
	}
	return false
}

func globPairOverlaps(x, y string) bool {
	if glob(x, y) || glob(y, x) {
		return true
	}
	xs, ys := strings.IndexByte(x, '*'), strings.IndexByte(y, '*')
	if xs < 0 || ys < 0 {
		return false
	}
	hx, hy := x[:xs], y[:ys]
	tx, ty := x[strings.LastIndexByte(x, '*')+1:], y[strings.LastIndexByte(y, '*')+1:]
	return (strings.HasPrefix(hx, hy) || strings.HasPrefix(hy, hx)) && (strings.HasSuffix(tx, ty) || strings.HasSuffix(ty, tx))
}
