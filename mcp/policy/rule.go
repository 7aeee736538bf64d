package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
)

// Rule is one configured policy rule: where it sits ([Layer]), what it decides ([Verdict])
// and which calls it matches. Every match field that is set must match (an empty one matches
// everything), and a field with several entries matches when any entry does.
type Rule struct {
	// ID names the rule in decisions and audit records; unique within the policy.
	ID string `yaml:"id" json:"id"`
	// Layer is immutable, tenant, resource, ask or allow (see [Layer]).
	Layer string `yaml:"layer" json:"layer"`
	// Decision is deny, ask or allow. Empty: deny in the three deny layers, ask in ask, allow
	// in allow. The deny layers only deny and ask only asks; allow may allow or ask (an ask a
	// grant answers).
	Decision string `yaml:"decision" json:"decision,omitempty"`
	// Principals, Tenants and Skills are globs ("*" matches any run of characters, slashes
	// included, every other character itself) on the caller's principal, its tenant and the
	// skill the call serves.
	Principals []string `yaml:"principals" json:"principals,omitempty"`
	// Tenants: see Principals.
	Tenants []string `yaml:"tenants" json:"tenants,omitempty"`
	// Skills: see Principals.
	Skills []string `yaml:"skills" json:"skills,omitempty"`
	// Tools are path.Match globs on the tool's catalog name ("notes__*", "fs__[rw]*"), as
	// contracts' are.
	Tools []string `yaml:"tools" json:"tools,omitempty"`
	// Effects and Risks match the tool's contract (read, write, destructive, external_send;
	// low, high).
	Effects []string `yaml:"effects" json:"effects,omitempty"`
	// Risks: see Effects.
	Risks []string `yaml:"risks" json:"risks,omitempty"`
	// Paths, URLs and IDs match the call's canonical resources: a path under a prefix
	// ("payments" covers payments and payments/x, "." every path), a URL under a prefix
	// (canonicalised like the call's; "https://example.com/api/"), an id exactly. A deny or
	// ask rule matches when any resource of the kind matches; an allow rule only when the call
	// names at least one resource of the kind and every one matches.
	Paths []string `yaml:"paths" json:"paths,omitempty"`
	// URLs: see Paths.
	URLs []string `yaml:"urls" json:"urls,omitempty"`
	// IDs: see Paths.
	IDs []string `yaml:"ids" json:"ids,omitempty"`
	// When is a CEL expression that must be true, over principal, tenant, skill, tool, effect
	// and risk (strings), args (the canonical arguments) and paths, urls and ids (lists of
	// the canonical resources). One that fails to evaluate counts as matching for a deny or
	// ask rule and as not matching for an allow rule: failure never widens.
	When string `yaml:"when" json:"when,omitempty"`
	// Reason is shown to the caller when the rule decides; default: the rule's id.
	Reason string `yaml:"reason" json:"reason,omitempty"`
}

// compiled is a checked rule ready to match.
type compiled struct {
	Rule
	layer   Layer
	verdict Verdict
	tools   []toolPattern
	paths   []string
	urls    []string
	when    cel.Program
}

// compileRule checks r and returns every problem as "field: message".
func compileRule(env *cel.Env, r Rule) (*compiled, []FieldError) {
	var errs []FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	c := &compiled{Rule: r}
	if !validUTF8(r) {
		bad("id", "the rule holds text that is not valid UTF-8")
	}
	if r.ID == "" {
		bad("id", "is required")
	} else if strings.HasPrefix(r.ID, builtinPrefix) {
		bad("id", "%q: ids starting %q are the policy's own", r.ID, builtinPrefix)
	}
	switch r.Layer {
	case "immutable":
		c.layer = LayerImmutable
	case "tenant":
		c.layer = LayerTenant
	case "resource":
		c.layer = LayerResource
	case "ask":
		c.layer = LayerAsk
	case "allow":
		c.layer = LayerAllow
	default:
		bad("layer", "%q is not immutable, tenant, resource, ask or allow", r.Layer)
	}
	c.verdict = Verdict(r.Decision)
	if c.verdict == "" {
		switch c.layer {
		case LayerAsk:
			c.verdict = Ask
		case LayerAllow:
			c.verdict = Allow
		default:
			c.verdict = Deny
		}
	}
	if c.layer != 0 && !slices.Contains(layerVerdicts[c.layer], c.verdict) {
		bad("decision", "%q is not allowed in layer %s (want %s)", r.Decision, c.layer, joinVerdicts(layerVerdicts[c.layer]))
	}
	for _, f := range []struct {
		name string
		vals []string
	}{{"principals", r.Principals}, {"tenants", r.Tenants}, {"skills", r.Skills}, {"tools", r.Tools}, {"ids", r.IDs}} {
		if slices.Contains(f.vals, "") {
			bad(f.name, "holds an empty entry")
		}
	}
	for _, g := range r.Tools {
		if _, err := path.Match(g, ""); err != nil {
			bad("tools", "bad pattern %q: %v", g, err)
		}
		c.tools = append(c.tools, newToolPattern(g))
	}
	for _, e := range r.Effects {
		if !slices.Contains([]string{"read", "write", "destructive", "external_send"}, e) {
			bad("effects", "%q is not read, write, destructive or external_send", e)
		}
	}
	for _, k := range r.Risks {
		if k != "low" && k != "high" {
			bad("risks", "%q is not low or high", k)
		}
	}
	for _, p := range r.Paths {
		cp, err := CanonicalPath("", p)
		if err != nil || p == "" {
			bad("paths", "%q is not a path under the root", p)
			continue
		}
		c.paths = append(c.paths, cp)
	}
	for _, u := range r.URLs {
		cu, err := CanonicalURL(u)
		if err != nil {
			bad("urls", "%v", err)
			continue
		}
		c.urls = append(c.urls, cu)
	}
	if r.When != "" {
		ast, iss := env.Compile(r.When)
		switch {
		case iss.Err() != nil:
			msg, _, _ := strings.Cut(iss.Err().Error(), "\n") // the rest draws a caret under the source
			bad("when", "%s", strings.TrimPrefix(msg, "ERROR: <input>:"))
		case ast.OutputType() != cel.BoolType:
			bad("when", "is %s, want a bool", ast.OutputType())
		default:
			prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize))
			if err != nil {
				bad("when", "%v", err)
			}
			c.when = prg
		}
	}
	return c, errs
}

// layerVerdicts are the verdicts a configured rule may give in each layer.
var layerVerdicts = map[Layer][]Verdict{
	LayerImmutable: {Deny}, LayerTenant: {Deny}, LayerResource: {Deny},
	LayerAsk: {Ask}, LayerAllow: {Allow, Ask},
}

func joinVerdicts(vs []Verdict) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, " or ")
}

// newEnv declares the variables a rule's When sees.
func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("principal", cel.StringType),
		cel.Variable("tenant", cel.StringType),
		cel.Variable("skill", cel.StringType),
		cel.Variable("tool", cel.StringType),
		cel.Variable("effect", cel.StringType),
		cel.Variable("risk", cel.StringType),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("paths", cel.ListType(cel.StringType)),
		cel.Variable("urls", cel.ListType(cel.StringType)),
		cel.Variable("ids", cel.ListType(cel.StringType)),
		cel.CrossTypeNumericComparisons(true),
	)
}

// glob reports whether s matches pattern, where "*" matches any run of characters (slashes
// and colons included: principals are "jwt:https://issuer#subject") and every other
// character itself.
func glob(pattern, s string) bool {
	for {
		star := strings.IndexByte(pattern, '*')
		if star < 0 {
			return pattern == s
		}
		if !strings.HasPrefix(s, pattern[:star]) {
			return false
		}
		s, pattern = s[star:], pattern[star+1:]
		if pattern == "" {
			return true
		}
		// Try every place the rest may start; patterns are short.
		for i := 0; i <= len(s); i++ {
			if glob(pattern, s[i:]) {
				return true
			}
		}
		return false
	}
}

// toolPattern is a path.Match glob on tool names, told at compile time whether the fast
// matcher can take it: literal text and "*" mean the same to both, as a tool name holds no
// "/".
type toolPattern struct {
	pattern string
	simple  bool
}

func newToolPattern(p string) toolPattern {
	return toolPattern{pattern: p, simple: !strings.ContainsAny(p, `?[\`)}
}

func (t toolPattern) match(tool string) bool {
	if t.simple {
		return glob(t.pattern, tool)
	}
	ok, _ := path.Match(t.pattern, tool)
	return ok
}

// anyTool reports whether a tool name matches one of patterns, or patterns is empty.
func anyTool(patterns []toolPattern, tool string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if p.match(tool) {
			return true
		}
	}
	return false
}

// toolGlob is path.Match on a tool name, by the same road as a rule's.
func toolGlob(pattern, tool string) bool { return newToolPattern(pattern).match(tool) }

func anyGlob(patterns []string, s string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if glob(p, s) {
			return true
		}
	}
	return false
}

func pathUnder(prefix, p string) bool {
	return prefix == "." || p == prefix || (len(p) > len(prefix) && p[len(prefix)] == '/' && p[:len(prefix)] == prefix)
}

func urlUnder(prefix, u string) bool {
	if u == prefix {
		return true
	}
	if !strings.HasPrefix(u, prefix) {
		return false
	}
	if strings.HasSuffix(prefix, "/") {
		return true
	}
	switch u[len(prefix)] {
	case '/', '?':
		return true
	}
	return false
}

// validUTF8 reports whether every text of r is valid UTF-8: YAML and JSON could not carry
// it back unchanged otherwise, and the version would not name what was configured.
func validUTF8(r Rule) bool {
	for _, s := range []string{r.ID, r.Layer, r.Decision, r.When, r.Reason} {
		if !utf8.ValidString(s) {
			return false
		}
	}
	for _, l := range [][]string{r.Principals, r.Tenants, r.Skills, r.Tools, r.Effects, r.Risks, r.Paths, r.URLs, r.IDs} {
		for _, s := range l {
			if !utf8.ValidString(s) {
				return false
			}
		}
	}
	return true
}
