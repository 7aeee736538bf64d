package tasks_test

import (
	"strings"
	"testing"

	"github.com/handoff-a2a/handoff/tasks"
)

// TestSealerRefuses: short or missing secrets are refused.
func TestSealerRefuses(t *testing.T) {
	if _, err := tasks.NewSealer(); err == nil {
		t.Error("a sealer without a secret")
	}
	if _, err := tasks.NewSealer([]byte("secret-A-0123456789abcdef0123456789abcdef"), []byte("short")); err == nil || !strings.Contains(err.Error(), "secret 1") {
		t.Errorf("a short secret: %v", err)
	}
}
