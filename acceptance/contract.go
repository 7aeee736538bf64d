package acceptance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"gopkg.in/yaml.v3"
)

// maxContractBytes bounds what a contract file may hold: contracts are written by hand, and a
// bound keeps a wrong path (a log, a binary) from being read whole.
const maxContractBytes = 1 << 20

// A Contract is what a delegated skill's peer must prove before its completion changes our
// state. It is immutable once loaded and safe for concurrent use.
type Contract struct {
	// Skill is the id of the delegated skill the contract governs.
	Skill string
	// Version names this revision of the contract; every ledger entry records it.
	Version string

	artifacts []artifactSpec // sorted by name, so checks and reasons come out in a stable order
	requires  []reference
	freshness *freshness
	verifiers []verifier
}

type artifactSpec struct {
	name   string
	schema *jsonschema.Resolved
}

// A reference is a JSON pointer into one artifact's data.
type reference struct {
	artifact string
	pointer  pointer
}

func (r reference) String() string { return r.artifact + "#" + r.pointer.text }

type freshness struct {
	at     reference
	maxAge time.Duration
}

type verifier struct {
	name      string
	tool      string
	args      map[string]argument
	condition *condition
}

// An argument is either a reference into the evidence or a literal passed through as written.
type argument struct {
	ref     *reference
	literal any
}

// The raw* types mirror the YAML text; decoding into them with KnownFields is what refuses
// unknown fields.
type rawContract struct {
	Skill          string               `yaml:"skill"`
	Version        string               `yaml:"version"`
	Artifacts      map[string]yaml.Node `yaml:"artifacts"`
	CommitRequires []rawReference       `yaml:"commit_requires"`
	Freshness      *rawFreshness        `yaml:"freshness"`
	Verifiers      []rawVerifier        `yaml:"verifiers"`
}

type rawReference struct {
	Artifact string `yaml:"artifact"`
	Pointer  string `yaml:"pointer"`
}

type rawFreshness struct {
	Artifact string `yaml:"artifact"`
	Pointer  string `yaml:"pointer"`
	MaxAge   string `yaml:"max_age"`
}

type rawVerifier struct {
	Name      string         `yaml:"name"`
	Tool      string         `yaml:"tool"`
	Arguments map[string]any `yaml:"arguments"`
	Condition string         `yaml:"condition"`
}

// LoadContract reads and compiles the contract in the YAML file at path. Every problem is
// reported, joined, each with the file, the line and the field it concerns.
func LoadContract(path string) (*Contract, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("acceptance contract: %w", err)
	}
	defer f.Close()
	return ParseContract(path, f)
}

// ParseContract reads and compiles a contract from r; name (usually the file path) prefixes
// every error. Unknown fields, JSON Schemas that do not compile, malformed JSON pointers,
// references to undeclared artifacts and CEL conditions that do not compile to a bool are all
// errors wrapping [ErrInvalidContract].
func ParseContract(name string, r io.Reader) (*Contract, error) {
	text, err := io.ReadAll(io.LimitReader(r, maxContractBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &parser{file: name}
	if len(text) > maxContractBytes {
		p.fail(0, "", "file larger than %d bytes", maxContractBytes)
		return nil, p.err()
	}
	var raw rawContract
	dec := yaml.NewDecoder(bytes.NewReader(text))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("empty contract")
		}
		p.yamlError(err)
		return nil, p.err()
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		p.fail(extra.Line, "", "more than one YAML document")
	}
	// A second, untyped decode keeps the line of every field for the errors below.
	if err := yaml.Unmarshal(text, &p.root); err != nil {
		p.yamlError(err)
		return nil, p.err()
	}
	c := p.contract(&raw)
	if err := p.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// A parser collects every problem in one contract, so its author fixes them in one pass.
type parser struct {
	file string
	root yaml.Node
	errs []error
}

func (p *parser) fail(line int, field, format string, args ...any) {
	where := p.file
	if line > 0 {
		where = fmt.Sprintf("%s:%d", where, line)
	}
	if field != "" {
		where += ": " + field
	}
	p.errs = append(p.errs, fmt.Errorf("%s: %s: %w", where, fmt.Sprintf(format, args...), ErrInvalidContract))
}

// unknownField matches yaml.v3's message for a field KnownFields refuses, which names our
// internal type; the error is rewritten in the same form as every other contract error.
var unknownField = regexp.MustCompile(`^line (\d+): field (.+) not found in type `)

// yamlError splits a yaml.TypeError, which already names its lines, into one error per problem.
func (p *parser) yamlError(err error) {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		p.fail(0, "", "%v", err)
		return
	}
	for _, msg := range te.Errors {
		if m := unknownField.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			p.fail(line, m[2], "unknown field")
			continue
		}
		p.fail(0, "", "%s", msg)
	}
}

func (p *parser) err() error { return errors.Join(p.errs...) }

// line finds the line of the field at path (map keys as strings, list indexes as ints), or of
// its nearest existing parent, so that an error points as close to its cause as it can.
func (p *parser) line(path ...any) int {
	n := &p.root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	for _, step := range path {
		var next *yaml.Node
		switch s := step.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == s {
						next, line = n.Content[i+1], n.Content[i].Line
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && s < len(n.Content) {
				next = n.Content[s]
				line = next.Line
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}

func (p *parser) contract(raw *rawContract) *Contract {
	c := &Contract{Skill: raw.Skill, Version: raw.Version}
	if raw.Skill == "" {
		p.fail(p.line("skill"), "skill", "required")
	}
	if raw.Version == "" {
		p.fail(p.line("version"), "version", "required")
	}
	if len(raw.Artifacts) == 0 {
		p.fail(p.line("artifacts"), "artifacts", "at least one artifact is required")
	}
	for _, name := range slices.Sorted(maps.Keys(raw.Artifacts)) {
		node := raw.Artifacts[name]
		if s := p.schema(name, &node); s != nil {
			c.artifacts = append(c.artifacts, artifactSpec{name: name, schema: s})
		}
	}
	for i, rr := range raw.CommitRequires {
		field := fmt.Sprintf("commit_requires[%d]", i)
		if ref, ok := p.reference(raw, rr.Artifact, rr.Pointer, field, "commit_requires", i); ok {
			c.requires = append(c.requires, ref)
		}
	}
	if f := raw.Freshness; f != nil {
		ref, ok := p.reference(raw, f.Artifact, f.Pointer, "freshness", "freshness")
		age, err := time.ParseDuration(f.MaxAge)
		switch {
		case err != nil:
			p.fail(p.line("freshness", "max_age"), "freshness.max_age", "not a duration such as 15m: %q", f.MaxAge)
		case age <= 0:
			p.fail(p.line("freshness", "max_age"), "freshness.max_age", "must be positive")
		case ok:
			c.freshness = &freshness{at: ref, maxAge: age}
		}
	}
	names := map[string]bool{}
	for i, rv := range raw.Verifiers {
		if v, ok := p.verifier(raw, i, rv); ok {
			if names[v.name] {
				p.fail(p.line("verifiers", i, "name"), fmt.Sprintf("verifiers[%d].name", i), "duplicate verifier %q", v.name)
			}
			names[v.name] = true
			c.verifiers = append(c.verifiers, v)
		}
	}
	return c
}

// schema compiles one artifact's inline schema. YAML is a superset of JSON, so the schema goes
// through JSON to reach the library in the form it was written for.
func (p *parser) schema(name string, node *yaml.Node) *jsonschema.Resolved {
	field, line := "artifacts."+name, p.line("artifacts", name)
	var doc any
	if err := node.Decode(&doc); err != nil {
		p.fail(line, field, "%v", err)
		return nil
	}
	js, err := json.Marshal(doc)
	if err != nil {
		p.fail(line, field, "schema is not JSON: %v", err)
		return nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(js, &s); err != nil {
		p.fail(line, field, "not a JSON Schema: %v", err)
		return nil
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		p.fail(line, field, "not a JSON Schema: %v", err)
		return nil
	}
	return resolved
}

func (p *parser) reference(raw *rawContract, artifact, ptr, field string, path ...any) (reference, bool) {
	ok := true
	if _, declared := raw.Artifacts[artifact]; !declared {
		p.fail(p.line(append(path, "artifact")...), field+".artifact", "%q is not a declared artifact", artifact)
		ok = false
	}
	parsed, err := parsePointer(ptr)
	if err != nil {
		p.fail(p.line(append(path, "pointer")...), field+".pointer", "%v", err)
		ok = false
	}
	return reference{artifact: artifact, pointer: parsed}, ok
}

func (p *parser) verifier(raw *rawContract, i int, rv rawVerifier) (verifier, bool) {
	field := fmt.Sprintf("verifiers[%d]", i)
	ok := true
	if rv.Name == "" {
		p.fail(p.line("verifiers", i, "name"), field+".name", "required")
		ok = false
	} else {
		field = fmt.Sprintf("verifiers[%d] (%s)", i, rv.Name)
	}
	if rv.Tool == "" {
		p.fail(p.line("verifiers", i, "tool"), field+".tool", "required")
		ok = false
	}
	v := verifier{name: rv.Name, tool: rv.Tool, args: map[string]argument{}}
	for _, arg := range slices.Sorted(maps.Keys(rv.Arguments)) {
		lit := rv.Arguments[arg]
		s, isString := lit.(string)
		artifact, ptr, isRef := strings.Cut(s, "#/")
		if !isString || !isRef {
			// Through JSON now, so that a literal the tool could not receive (a YAML map with
			// non-string keys) is a load error, not a failed verification.
			norm, err := normalize(lit)
			if err != nil {
				p.fail(p.line("verifiers", i, "arguments", arg), field+".arguments."+arg, "not a JSON value: %v", err)
				ok = false
			}
			v.args[arg] = argument{literal: norm}
			continue
		}
		ref, good := p.reference(raw, artifact, "/"+ptr, field+".arguments."+arg, "verifiers", i, "arguments", arg)
		ok = ok && good
		v.args[arg] = argument{ref: &ref}
	}
	cond, err := compileCondition(rv.Condition)
	if err != nil {
		p.fail(p.line("verifiers", i, "condition"), field+".condition", "%v", err)
		ok = false
	}
	v.condition = cond
	return v, ok
}
