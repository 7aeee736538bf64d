package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/acceptance"
)

func TestDelegations(t *testing.T) {
	dir := t.TempDir()
	l, err := acceptance.OpenBoltLedger(filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Track(t.Context(), &acceptance.Delegation{TaskID: "local-1", Skill: "refund", Peer: "payments",
		RemoteTaskID: "remote-1", RemoteState: a2a.TaskStateCompleted, Outcome: "committed", Updated: time.Now()}); err != nil {
		t.Fatal(err)
	}
	l.Close()

	var out bytes.Buffer
	if err := run(t.Context(), []string{"delegations", "--data-dir", dir}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"local-1", "refund", "payments", "remote-1", "TASK_STATE_COMPLETED", "committed"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("delegations lack %q:\n%s", want, out.String())
		}
	}

	// --config finds the data directory; --json prints the records.
	cfg := filepath.Join(t.TempDir(), "agent.yaml")
	yaml := "name: A\ndescription: d\ndata_dir: " + dir + "\nauth: {anonymous: true}\nskills: [{id: s, name: S, executor: tck}]\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"delegations", "--config", cfg, "--json"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if got := decodeLines[acceptance.Delegation](t, out.String()); len(got) != 1 || got[0].RemoteTaskID != "remote-1" {
		t.Fatalf("--json: %s", out.String())
	}

	for name, args := range map[string][]string{
		"nothing": {"delegations"},
		"two":     {"delegations", "--data-dir", dir, "http://127.0.0.1:1"},
	} {
		var ue *usageError
		if err := run(t.Context(), args, &out, &out); !errors.As(err, &ue) {
			t.Fatalf("%s: %v, want a usage error", name, err)
		}
	}
}
