package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/handoff-a2a/handoff"
	"github.com/handoff-a2a/handoff/internal/auth"
)

// startHandoff serves a real Handoff agent that requires an API key.
func startHandoff(t *testing.T, key string) string {
	t.Helper()
	url, _ := serveHandoff(t, t.TempDir(), fmt.Sprintf("name: A\ndescription: B\nlog: {level: error}\nlimits: {shutdown_grace: 1s}\n"+
		"skills: [{id: s, name: S, executor: tck}]\nauth: {api_key_header: X-Agent-Key, api_keys: [{name: cli, sha256: %s}]}\n", auth.HashAPIKey(key)))
	return url
}

// serveHandoff serves a real Handoff agent from yaml on a loopback port,
// its data in dir, until the test ends or stop is called.
func serveHandoff(t *testing.T, dir, yaml string) (url string, stop func()) {
	t.Helper()
	cfg, err := handoff.ParseConfig("cli.yaml", strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = dir
	a, err := handoff.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}

func TestCredentialsFlags(t *testing.T) {
	t.Setenv("HANDOFF_API_KEY", "")
	t.Setenv("HANDOFF_TOKEN", "")
	url := startHandoff(t, "k3y")
	var out, errOut bytes.Buffer
	err := run(t.Context(), []string{"send", url, "hello"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("without a key: %v", err)
	}
	out.Reset()
	// The key goes in the header the card names (X-Agent-Key here).
	if err := run(t.Context(), []string{"send", url, "hello", "--api-key", "k3y"}, &out, &errOut); err != nil {
		t.Fatalf("with the key: %v", err)
	}
	if !strings.Contains(out.String(), "state: completed") {
		t.Fatalf("output: %s", out.String())
	}
	t.Setenv("HANDOFF_API_KEY", "k3y")
	out.Reset()
	if err := run(t.Context(), []string{"tasks", url}, &out, &errOut); err != nil || !strings.Contains(out.String(), "completed") {
		t.Fatalf("key from the environment: %v %s", err, out.String())
	}
	if err := run(t.Context(), []string{"get", url, "x", "--api-key", "wrong"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong key: %v", err)
	}
	if strings.Contains(out.String()+errOut.String(), "k3y") {
		t.Fatal("the key was printed")
	}
}
