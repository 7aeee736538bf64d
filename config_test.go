package handoff

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const minimalConfig = `name: A
description: B
auth: {anonymous: true}
skills:
  - id: s
    name: S
    executor: tck
`

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig("agent.yaml", strings.NewReader(minimalConfig))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8080" || c.DataDir != "data" || !*c.Capabilities.Streaming ||
		c.Limits.MaxBodyBytes != 4<<20 || c.Limits.ShutdownGrace.Duration != 10*time.Second {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", minimalConfig + "colour: red\n", []string{"agent.yaml", "line 8", "colour"}},
		{"unknown nested key", minimalConfig + "limits:\n  max_body: 3\n", []string{"line 9", "max_body"}},
		{"bad duration", minimalConfig + "limits:\n  shutdown_grace: soon\n", []string{"line 9", "not a duration"}},
		{"negative duration", minimalConfig + "limits:\n  shutdown_grace: -1s\n", []string{"negative"}},
		{"bad type", minimalConfig + "limits:\n  max_body_bytes: lots\n", []string{"line 9", "lots"}},
		{"missing name", "description: B\nskills: [{id: s, name: S, executor: tck}]\n", []string{"agent.yaml: name: is required"}},
		{"no skills", "name: A\ndescription: B\n", []string{"skills: at least one"}},
		{"unknown executor", "name: A\ndescription: B\nskills: [{id: s, name: S, executor: magic}]\n", []string{`agent.yaml:3: skills[0].executor: "magic"`}},
		{"bad value has its line", minimalConfig + "log:\n  format: xml\n", []string{"agent.yaml:9: log.format"}},
		{"duplicate skill", "name: A\ndescription: B\nskills: [{id: s, name: S, executor: tck}, {id: s, name: T, executor: tck}]\n", []string{"skills[1].id"}},
		{"bad public url", minimalConfig + "public_url: ftp://x\n", []string{"public_url"}},
		{"bad log level", minimalConfig + "log: {level: loud}\n", []string{"log.level"}},
		{"tiny body limit", minimalConfig + "limits: {max_body_bytes: 10}\n", []string{"max_body_bytes"}},
		{"two documents", minimalConfig + "---\nname: C\n", []string{"one YAML document"}},
		{"empty", "", []string{"empty"}},
		{"nobody can call", "name: A\ndescription: B\nskills: [{id: s, name: S, executor: tck}]\n", []string{"auth: no caller"}},
		{"bad key hash", "name: A\ndescription: B\nskills: [{id: s, name: S, executor: tck}]\nauth:\n  api_keys: [{name: k, sha256: abc}]\n", []string{"auth.api_keys[0].sha256"}},
		{"bad idempotency", minimalConfig + "tool_contracts: [{tool: a__b, effect: write, risk: low, approval: none, idempotency: always}]\n", []string{"tool_contracts[0].idempotency", `"always"`}},
		{"issuer without keys", "name: A\ndescription: B\nskills: [{id: s, name: S, executor: tck}]\nauth:\n  jwt_issuers: [{issuer: i, audience: a}]\n", []string{"exactly one of jwks_url"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("agent.yaml", strings.NewReader(tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	_, err := LoadConfig(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, ErrNoConfig) || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("err = %v", err)
	}
}

func TestConformanceConfigLoads(t *testing.T) {
	c, err := LoadConfig(filepath.Join("examples", "conformance", "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Skills) != 1 || c.Skills[0].Executor != "tck" {
		t.Fatalf("skills: %+v", c.Skills)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add(minimalConfig)
	if b, err := os.ReadFile(filepath.Join("examples", "conformance", "agent.yaml")); err == nil {
		f.Add(string(b))
	}
	f.Add("name: [\n")
	f.Add("limits: {shutdown_grace: 1h}\n")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseConfig("f.yaml", strings.NewReader(s))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if c.Name == "" || len(c.Skills) == 0 || c.Limits.MaxBodyBytes < 1024 {
			t.Fatalf("accepted an invalid config: %+v", c)
		}
	})
}
