package model

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"time"
)

// Defaults of [Endpoint] and [SkillConfig] fields left empty.
const (
	DefaultTimeout            = 60 * time.Second
	DefaultMaxRetries         = 2
	DefaultMaxTurns           = 8
	DefaultMaxToolCalls       = 16
	DefaultSchemaBudgetTokens = 4000
)

// Endpoint is one entry of the config's models list: an OpenAI-compatible Chat Completions
// endpoint. The API key is never in the config: APIKeyEnv names the environment variable the
// composition root reads it from.
type Endpoint struct {
	// Name is what a skill's use names the endpoint by; required.
	Name string `yaml:"name"`
	// BaseURL is the endpoint's http(s) base; requests go to BaseURL/chat/completions.
	// Required.
	BaseURL string `yaml:"base_url"`
	// Model is the model the requests ask for; required.
	Model string `yaml:"model"`
	// APIKeyEnv is optional: local servers (Ollama, llama.cpp) often want no key.
	APIKeyEnv string `yaml:"api_key_env"`
	// Timeout bounds each attempt; zero means [DefaultTimeout].
	Timeout time.Duration `yaml:"timeout"`
	// MaxRetries is how often a 429, 408, 409 or 5xx answer (or a lost connection) is retried;
	// nil means [DefaultMaxRetries], 0 means never.
	MaxRetries *int `yaml:"max_retries"`
}

var (
	// envName is a portable environment variable name.
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// skillName is the Agent Skills name rule, also used for endpoint names.
	skillName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
)

// Validate reports every problem of e.
func (e Endpoint) Validate() []FieldError {
	var errs []FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, FieldError{field, fmt.Sprintf(format, args...)})
	}
	if e.Name == "" {
		bad("name", "is required")
	}
	if e.BaseURL == "" {
		bad("base_url", "is required")
	} else if !httpURL(e.BaseURL) {
		bad("base_url", "%q is not an http(s) URL", e.BaseURL)
	}
	if e.Model == "" {
		bad("model", "is required")
	}
	if e.APIKeyEnv != "" && !envName.MatchString(e.APIKeyEnv) {
		bad("api_key_env", "%q is not an environment variable name", e.APIKeyEnv)
	}
	if e.Timeout < 0 {
		bad("timeout", "is negative")
	}
	if e.MaxRetries != nil && (*e.MaxRetries < 0 || *e.MaxRetries > 10) {
		bad("max_retries", "must be between 0 and 10")
	}
	return errs
}

// timeout is e's per-attempt timeout with its default.
func (e Endpoint) timeout() time.Duration {
	if e.Timeout == 0 {
		return DefaultTimeout
	}
	return e.Timeout
}

// maxRetries is e's retry count with its default.
func (e Endpoint) maxRetries() int {
	if e.MaxRetries == nil {
		return DefaultMaxRetries
	}
	return *e.MaxRetries
}

// SkillConfig is a skill's model: block.
type SkillConfig struct {
	// Use names an [Endpoint].
	Use string `yaml:"use"`
	// Instructions is the system prompt; it or InstructionsFile is required.
	Instructions string `yaml:"instructions"`
	// InstructionsFile is a file holding the system prompt, relative to the config file; the
	// composition root reads it into Instructions.
	InstructionsFile string `yaml:"instructions_file"`
	// Tools are globs (path.Match syntax) over catalog names server__tool; nothing else is
	// visible.
	Tools []string `yaml:"tools"`
	// Delegates are local delegate skills offered as tools.
	Delegates []string `yaml:"delegates"`
	// SkillsDir holds Agent Skills (<name>/SKILL.md).
	SkillsDir string `yaml:"skills_dir"`
	// MaxTurns bounds the model round trips of one task; zero means [DefaultMaxTurns].
	MaxTurns int `yaml:"max_turns"`
	// MaxToolCalls bounds the proposed calls of catalog tools and delegates of one task;
	// zero means [DefaultMaxToolCalls].
	MaxToolCalls int `yaml:"max_tool_calls"`
	// SchemaBudgetTokens is the size (at four bytes a token) the visible tools' definitions
	// may take before the model gets search_tools and call_tool instead of every schema;
	// zero means [DefaultSchemaBudgetTokens].
	SchemaBudgetTokens int `yaml:"schema_budget_tokens"`
}

// Validate reports every problem of s. endpoints are the names of the configured models.
func (s SkillConfig) Validate(endpoints []string) []FieldError {
	var errs []FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, FieldError{field, fmt.Sprintf(format, args...)})
	}
	switch {
	case s.Use == "":
		bad("use", "is required")
	case !slices.Contains(endpoints, s.Use):
		bad("use", "names no configured model %q", s.Use)
	}
	switch {
	case s.Instructions == "" && s.InstructionsFile == "":
		bad("instructions", "is required (or instructions_file)")
	case s.Instructions != "" && s.InstructionsFile != "":
		bad("instructions_file", "cannot be set together with instructions")
	}
	for i, g := range s.Tools {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			bad(fmt.Sprintf("tools[%d]", i), "%q is not a valid glob", g)
		}
	}
	for i, d := range s.Delegates {
		if d == "" {
			bad(fmt.Sprintf("delegates[%d]", i), "is empty")
		}
	}
	for _, n := range []struct {
		field string
		v     int
	}{{"max_turns", s.MaxTurns}, {"max_tool_calls", s.MaxToolCalls}, {"schema_budget_tokens", s.SchemaBudgetTokens}} {
		if n.v < 0 {
			bad(n.field, "is negative")
		}
	}
	return errs
}

// WithDefaults returns s with its zero limits set to their defaults.
func (s SkillConfig) WithDefaults() SkillConfig {
	if s.MaxTurns == 0 {
		s.MaxTurns = DefaultMaxTurns
	}
	if s.MaxToolCalls == 0 {
		s.MaxToolCalls = DefaultMaxToolCalls
	}
	if s.SchemaBudgetTokens == 0 {
		s.SchemaBudgetTokens = DefaultSchemaBudgetTokens
	}
	return s
}

// httpURL reports whether s is an absolute http or https URL with a host.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
