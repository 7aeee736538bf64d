package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-a2a/handoff/examples/scriptedmodel/script"
)

// TestRunPrintsItsURLFirst runs the command in-process and talks to the URL it prints.
func TestRunPrintsItsURLFirst(t *testing.T) {
	file := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(file, []byte("rules: [{say: hi}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--script", file, "--listen", "127.0.0.1:0"}, w) }()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSpace(line)
	if !strings.HasPrefix(base, "http://127.0.0.1:") || !strings.HasSuffix(base, "/v1") {
		t.Fatalf("first line %q", line)
	}
	res, err := http.Post(base+"/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), `"content":"hi"`) {
		t.Fatalf("answer %s", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

func TestRunNeedsAScript(t *testing.T) {
	if err := run(t.Context(), nil, io.Discard); err == nil || !strings.Contains(err.Error(), "--script") {
		t.Fatalf("run: %v", err)
	}
}

func TestTheSampleScriptParses(t *testing.T) {
	if _, err := script.Load("notes.yaml"); err != nil {
		t.Fatal(err)
	}
}
