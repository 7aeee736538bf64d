package handoff

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/mcp"
)

func TestRetentionConfig(t *testing.T) {
	c, err := ParseConfig("agent.yaml", strings.NewReader(minimalConfig+`retention:
  finished_tasks: 720h
  tenants:
    archive: {finished_tasks: 0s}
    scratch: {finished_tasks: 1h}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Retention.policy()
	if r.Window("") != 720*time.Hour || r.Window("scratch") != time.Hour || r.Window("archive") != 0 || r.Window("other") != 720*time.Hour {
		t.Errorf("policy = %+v", r)
	}
	if r.Shortest() != time.Hour {
		t.Errorf("shortest window = %v, want 1h", r.Shortest())
	}
	c, err = ParseConfig("agent.yaml", strings.NewReader(minimalConfig))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Retention.policy(); r.Shortest() != 0 {
		t.Errorf("default retention = %+v, want forever", r)
	}
}

func TestRetentionConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", "retention:\n  finished: 1h\n", []string{"agent.yaml:9: retention.finished: is not a known key"}},
		{"unknown tenant key", "retention:\n  tenants:\n    a:\n      finished_tasks: 1h\n      audit: 2h\n", []string{"agent.yaml:12: retention.tenants.a.audit: is not a known key"}},
		{"bad duration", "retention:\n  finished_tasks: a month\n", []string{`agent.yaml:9: retention.finished_tasks: "a month" is not a duration`}},
		{"negative", "retention:\n  finished_tasks: -1h\n", []string{"agent.yaml:9: retention.finished_tasks:", "negative"}},
		{"under a second", "retention:\n  finished_tasks: 10ms\n", []string{"agent.yaml:9: retention.finished_tasks: 10ms is under the minimum of 1s"}},
		{"audit under a second", "retention:\n  audit: 1ms\n", []string{"agent.yaml:9: retention.audit: 1ms is under the minimum of 1s"}},
		{"tenant without window", "retention:\n  tenants:\n    a: {}\n", []string{"agent.yaml:10: retention.tenants.a: finished_tasks is required"}},
		{"tenant under a second", "retention:\n  tenants:\n    a: {finished_tasks: 1ms}\n", []string{"agent.yaml:10: retention.tenants.a.finished_tasks: 1ms is under the minimum"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("agent.yaml", strings.NewReader(minimalConfig+tc.yaml))
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

// TestPruneAudit: the audit pruning loop deletes the records older than
// its window and the grants expired longer ago, and stops with its ctx.
func TestPruneAudit(t *testing.T) {
	a, err := mcp.OpenBoltAudit(filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	now := time.Now()
	for _, at := range []time.Time{now.Add(-time.Hour), now.Add(-time.Minute), now} {
		if err := a.Append(t.Context(), &mcp.AuditRecord{Time: at, TaskID: "t", Tool: "s__t", Outcome: mcp.OutcomeSuccess}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		pruneAudit(ctx, a, a.Grants(), 30*time.Second, slog.New(slog.DiscardHandler))
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left, err := a.List(t.Context(), mcp.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records left 10s on, want the newest alone", len(left))
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
	cancel()
	<-done
}
