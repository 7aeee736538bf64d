package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeWarnsAboutHazards: `handoff serve` starts with a config that is
// readable by others and allow-lists the whole internet and a private range
// for push, and warns about each; a loopback entry draws no warning.
func TestServeWarnsAboutHazards(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "agent.yaml")
	yaml := `name: Hazards
description: a config with risks
auth: {anonymous: true}
limits: {shutdown_grace: 1s}
capabilities: {push_notifications: true}
push: {allow_hosts: [0.0.0.0/0, 10.0.0.0/8, 127.0.0.1]}
skills: [{id: tck, name: T, executor: tck}]
`
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(config, 0o644); err != nil { // past the umask
		t.Fatal(err)
	}
	ag := launch(t, "agent", config, freeAddr(t), filepath.Join(dir, "data"))
	ag.waitReady()
	log := ag.stderr.String()
	for _, want := range []string{
		"the config file is readable by group or others (mode 0644)",
		`push.allow_hosts[0]: \"0.0.0.0/0\" allows the whole internet`,
		`push.allow_hosts[1]: \"10.0.0.0/8\" allows private addresses (10.0.0.0/8)`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not warn %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "allow_hosts[2]") {
		t.Errorf("the log warns about the loopback entry:\n%s", log)
	}
	if n := strings.Count(log, `msg="config hazard"`); n != 3 {
		t.Errorf("%d config hazards logged, want 3:\n%s", n, log)
	}
}
