package script

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"strings"
	"text/template"

	"gopkg.in/yaml.v3"
)

// Script is a list of rules, tried in order.
type Script struct {
	// Model is the name GET /v1/models lists; "scripted" by default.
	Model string `yaml:"model" json:"model"`
	Rules []Rule `yaml:"rules" json:"rules"`
}

// Rule answers a request its When matches.
type Rule struct {
	When  When   `yaml:"when" json:"when"`
	Calls []Call `yaml:"calls" json:"calls"`
	// Say is the answer's text (with Calls, the text beside them).
	Say string `yaml:"say" json:"say"`
	// Fail answers with an HTTP error instead, for the first Times requests it matches.
	Fail *Fail `yaml:"fail" json:"fail"`
	// NoChoices answers with an empty choices list.
	NoChoices bool `yaml:"no_choices" json:"no_choices"`
}

// When are a rule's conditions; an empty one always holds.
type When struct {
	// Last is the role of the last message: user or tool.
	Last string `yaml:"last" json:"last"`
	// Offered is a glob some offered tool's name matches; NotOffered one that none matches.
	Offered    string `yaml:"offered" json:"offered"`
	NotOffered string `yaml:"not_offered" json:"not_offered"`
	// After is a glob the tool the last tool message answers matches.
	After string `yaml:"after" json:"after"`
	// Contains is a substring of the last message's text.
	Contains string `yaml:"contains" json:"contains"`
}

// Call is one tool call of an answer.
type Call struct {
	// Tool is a name or a glob over the offered tools.
	Tool string `yaml:"tool" json:"tool"`
	// Arguments are encoded as JSON after templating each string; RawArguments, when set, is
	// sent as is (to send broken JSON).
	Arguments    any    `yaml:"arguments" json:"arguments"`
	RawArguments string `yaml:"raw_arguments" json:"raw_arguments"`
	// Force sends Tool as named even when nothing offered matches it.
	Force bool `yaml:"force" json:"force"`
}

// Fail is an HTTP error answer.
type Fail struct {
	Status     int    `yaml:"status" json:"status"`
	RetryAfter string `yaml:"retry_after" json:"retry_after"`
	// Times is how many matching requests fail; 0 means all of them.
	Times int `yaml:"times" json:"times"`
}

// Data is what templates see.
type Data struct {
	// User is the last user message's text; Result the last tool message's.
	User, Result string
	// Results are every tool message's text, in order: {{index .Results 0}} is the first.
	Results []string
	// Hit is the first tool name in the last tool result when it is a list of {name} (what
	// search_tools answers), or "".
	Hit string
	// Turn counts the assistant messages so far.
	Turn int
}

// Load reads a script file, YAML or JSON.
func Load(file string) (*Script, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Parse decodes a script (YAML, so JSON too) and checks its rules.
func Parse(data []byte) (*Script, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("decode script: %w", err)
	}
	for i, r := range s.Rules {
		for _, g := range []string{r.When.Offered, r.When.NotOffered, r.When.After} {
			if _, err := path.Match(g, ""); err != nil {
				return nil, fmt.Errorf("rule %d: bad glob %q", i, g)
			}
		}
		if r.When.Last != "" && r.When.Last != "user" && r.When.Last != "tool" {
			return nil, fmt.Errorf("rule %d: last must be user or tool", i)
		}
		if len(r.Calls) == 0 && r.Say == "" && r.Fail == nil && !r.NoChoices {
			return nil, fmt.Errorf("rule %d: says nothing", i)
		}
	}
	if s.Model == "" {
		s.Model = "scripted"
	}
	return &s, nil
}

// expand applies the templates in every string of v.
func expand(v any, d Data) (any, error) {
	switch x := v.(type) {
	case string:
		return render(x, d)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			ev, err := expand(e, d)
			if err != nil {
				return nil, err
			}
			out[k] = ev
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			ev, err := expand(e, d)
			if err != nil {
				return nil, err
			}
			out[i] = ev
		}
		return out, nil
	}
	return v, nil
}

// render executes one template string.
func render(s string, d Data) (string, error) {
	if !strings.Contains(s, "{{") {
		return s, nil
	}
	t, err := template.New("").Option("missingkey=error").Parse(s)
	if err != nil {
		return "", fmt.Errorf("template %q: %w", s, err)
	}
	var b strings.Builder
	if err := t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("template %q: %w", s, err)
	}
	return b.String(), nil
}

// firstHit is the first name in a JSON list of {name} inside result (or its output field).
func firstHit(result string) string {
	var obs struct {
		Output json.RawMessage `json:"output"`
	}
	raw := []byte(result)
	if json.Unmarshal(raw, &obs) == nil && len(obs.Output) > 0 {
		raw = obs.Output
	}
	var hits []struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &hits) == nil && len(hits) > 0 {
		return hits[0].Name
	}
	return ""
}
