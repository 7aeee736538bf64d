package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDataDirRefused: every command that reads a stopped agent's data
// directory refuses one that is missing or empty, naming it, and leaves it
// as it was: opening a store there would create an empty one and report
// nothing, as if the agent had done nothing.
func TestDataDirRefused(t *testing.T) {
	for _, kind := range []string{"missing", "empty"} {
		dir := filepath.Join(t.TempDir(), "data")
		if kind == "empty" {
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		cfg := filepath.Join(t.TempDir(), "agent.yaml")
		yaml := "name: A\ndescription: d\ndata_dir: " + dir + "\nauth: {anonymous: true}\nskills: [{id: s, name: S, executor: tck}]\n"
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"ledger", "--data-dir", dir},
			{"ledger", "--data-dir", dir, "--json"},
			{"push", "status", "--data-dir", dir},
			{"audit", "--data-dir", dir},
			{"delegations", "--data-dir", dir},
			{"delegations", "--config", cfg},
			{"store", "recover", "--data-dir", dir},
			{"store", "recover", "--data-dir", dir, "--apply"},
		} {
			var out bytes.Buffer
			err := run(t.Context(), args, &out, &out)
			if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "no agent data in "+dir) {
				t.Errorf("%s dir: handoff %s: %v (exit %d), want exit 1 and \"no agent data in %s\"", kind, strings.Join(args, " "), err, exitCode(err), dir)
			}
			if out.Len() > 0 {
				t.Errorf("%s dir: handoff %s printed %q", kind, strings.Join(args, " "), out.String())
			}
			entries, err := os.ReadDir(dir)
			if kind == "missing" && !os.IsNotExist(err) {
				t.Fatalf("handoff %s created the missing %s (%v)", strings.Join(args, " "), dir, err)
			}
			if kind == "empty" && len(entries) > 0 {
				t.Fatalf("handoff %s created %v in the empty %s", strings.Join(args, " "), entries[0].Name(), dir)
			}
		}
	}
}

// TestDataDirWithoutFile: an agent's data directory that lacks the file a
// command reads (no ledger: the agent never delegated; no audit log: it has
// no MCP servers) lists nothing and still creates nothing.
func TestDataDirWithoutFile(t *testing.T) {
	dir := t.TempDir()
	_, stop := serveHandoff(t, dir, "name: A\ndescription: B\nlog: {level: error}\nlimits: {shutdown_grace: 1s}\n"+
		"auth: {anonymous: true}\nskills: [{id: s, name: S, executor: tck}]\n")
	stop()
	before := dirNames(t, dir)
	for args, want := range map[string]string{
		"ledger":             "no committed delegations\n",
		"ledger --json":      "",
		"delegations":        "no delegations\n",
		"audit":              "no tool calls\n",
		"audit --json":       "",
		"delegations --json": "",
	} {
		var out bytes.Buffer
		if err := run(t.Context(), append(strings.Fields(args), "--data-dir", dir), &out, &out); err != nil || out.String() != want {
			t.Errorf("handoff %s: %v %q, want %q", args, err, out.String(), want)
		}
	}
	if after := dirNames(t, dir); after != before {
		t.Fatalf("the data directory held %s, now %s", before, after)
	}
}

func dirNames(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}
