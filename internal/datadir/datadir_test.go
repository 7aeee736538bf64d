package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	root := t.TempDir()
	for name, files := range map[string][]string{
		"store":          {TaskStore},
		"log only":       {TaskStore + ".wal-00000001"},
		"ledger":         {Ledger},
		"audit log":      {AuditLog},
		"with a key":     {SigningKey, TaskStore},
		"missing":        nil,
		"empty":          {},
		"a key only":     {SigningKey},
		"something else": {"notes.txt", Artifacts},
	} {
		dir := filepath.Join(root, strings.ReplaceAll(name, " ", "-"))
		if files != nil {
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		err := Check(dir)
		holds := false
		for _, f := range files {
			holds = holds || f != SigningKey && f != "notes.txt" && f != Artifacts
		}
		if holds && err != nil {
			t.Errorf("%s: %v, want nil", name, err)
		}
		if !holds && (!errors.Is(err, ErrNoAgentData) || err.Error() != "no agent data in "+dir) {
			t.Errorf("%s: %v, want ErrNoAgentData naming the directory", name, err)
		}
	}
}

func TestFind(t *testing.T) {
	dir := t.TempDir()
	if _, err := Find(dir, Ledger); !errors.Is(err, ErrNoAgentData) {
		t.Fatalf("empty directory: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, TaskStore), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := Find(dir, Ledger); p != "" || err != nil {
		t.Fatalf("no ledger: %q %v", p, err)
	}
	if p, err := Find(dir, TaskStore); p != filepath.Join(dir, TaskStore) || err != nil {
		t.Fatalf("task store: %q %v", p, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("Find created files: %v", entries)
	}
}
