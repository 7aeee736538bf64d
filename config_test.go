package handoff

import (
	"errors"
	"fmt"
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
		{"unknown key", minimalConfig + "colour: red\n", []string{"agent.yaml:8: colour: is not a known key"}},
		{"unknown nested key", minimalConfig + "limits:\n  max_body: 3\n", []string{"agent.yaml:9: limits.max_body: is not a known key"}},
		{"unknown section", minimalConfig + "limitz:\n  max_body: 3\n", []string{"agent.yaml:8:", "limitz"}},
		{"bad duration", minimalConfig + "limits:\n  shutdown_grace: soon\n", []string{"agent.yaml:9: limits.shutdown_grace:", "not a duration"}},
		{"negative duration", minimalConfig + "limits:\n  shutdown_grace: -1s\n", []string{"negative"}},
		{"bad type", minimalConfig + "limits:\n  max_body_bytes: lots\n", []string{"agent.yaml:9: limits.max_body_bytes:", "lots"}},
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

// TestParseConfigReportsEverything: every problem of a file comes in one
// error, each with its file and line: bad durations and bad types along
// with unknown keys, and the checks of the values that did decode.
func TestParseConfigReportsEverything(t *testing.T) {
	yaml := `name: A
description: B
skills: [{id: s, name: S, executor: magic}]
auth: {anonymous: true}
limits:
  shutdown_grace: soon
  executor_idle_timeout: -1s
  max_body_bytes: lots
colour: red
server:
  idle_timeout: 1x
log: {format: xml}
`
	_, err := ParseConfig("agent.yaml", strings.NewReader(yaml))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{
		`agent.yaml:6: limits.shutdown_grace: "soon" is not a duration`,
		`agent.yaml:7: limits.executor_idle_timeout: duration "-1s" is negative`,
		"agent.yaml:8:", "lots",
		"agent.yaml:9: colour: is not a known key",
		`agent.yaml:11: server.idle_timeout: "1x" is not a duration`,
		`agent.yaml:12: log.format: "xml"`,
		`agent.yaml:3: skills[0].executor: "magic"`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q:\n%v", w, err)
		}
	}
}

// TestConfigHazards: a config or key file readable by group or others, and
// push allow-list entries that allow the whole internet or private ranges,
// are each named; a tight config has none.
func TestConfigHazards(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	openKey, closedKey := write("open.jwk", 0o644), write("closed.jwk", 0o600)
	openSecret := write("store.secret", 0o640)
	body := minimalConfig + fmt.Sprintf(`signing: {keys: [{file: %s}, {file: %s}]}
store: {secret_key_files: [%s]}
push: {allow_hosts: [127.0.0.1, localhost, hooks.example.com, 0.0.0.0/0, "::/0", "*", 10.1.2.0/24, 192.168.1.7, 169.254.169.254, "fd00::/8", 172.16.0.0/12, 100.64.0.1]}
`, openKey, closedKey, openSecret)
	cfgPath := write("agent.yaml", 0o644)
	if err := os.WriteFile(cfgPath, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.Hazards(), "\n")
	for _, w := range []string{
		cfgPath + ": the config file is readable by group or others (mode 0644)",
		openKey + ": signing.keys[0].file is readable by group or others (mode 0644)",
		openSecret + ": store.secret_key_files[0] is readable by group or others (mode 0640)",
		`push.allow_hosts[3]: "0.0.0.0/0" allows the whole internet`,
		`push.allow_hosts[4]: "::/0" allows the whole internet`,
		`push.allow_hosts[5]: "*"`,
		`push.allow_hosts[6]: "10.1.2.0/24" allows private addresses (10.0.0.0/8)`,
		`push.allow_hosts[7]: "192.168.1.7" allows private addresses (192.168.0.0/16)`,
		`push.allow_hosts[8]: "169.254.169.254" allows private addresses (169.254.0.0/16)`,
		`push.allow_hosts[9]: "fd00::/8" allows private addresses (fc00::/7)`,
		`push.allow_hosts[10]: "172.16.0.0/12" allows private addresses (172.16.0.0/12)`,
		`push.allow_hosts[11]: "100.64.0.1" allows private addresses (100.64.0.0/10)`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("hazards do not contain %q:\n%s", w, got)
		}
	}
	for _, unwanted := range []string{closedKey, "allow_hosts[0]", "allow_hosts[1]", "allow_hosts[2]"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("hazards name %q, which is fine:\n%s", unwanted, got)
		}
	}

	if err := os.Chmod(cfgPath, 0o600); err != nil {
		t.Fatal(err)
	}
	tight, err := LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	tight.Signing.Keys, tight.Store.SecretKeyFiles, tight.Push.AllowHosts = tight.Signing.Keys[1:], nil, []string{"127.0.0.1"}
	if h := tight.Hazards(); len(h) != 0 {
		t.Fatalf("a tight config has hazards: %q", h)
	}
}
