package tasks_test

import (
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// A Retention keeps finished tasks for a window, with tenants of their own.
func ExampleRetention() {
	r := tasks.Retention{Finished: 30 * 24 * time.Hour, Tenants: map[string]time.Duration{"archive": 0, "scratch": time.Hour}}
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	ended := now.Add(-2 * time.Hour)
	for _, tenant := range []string{"", "scratch", "archive"} {
		fmt.Printf("%q: window %v, expired %v\n", tenant, r.Window(tenant), r.Expired(tenant, a2a.TaskStateCompleted, ended, now))
	}
	fmt.Println("working:", r.Expired("scratch", a2a.TaskStateWorking, ended, now))
	fmt.Println("shortest:", r.Shortest())
	// Output:
	// "": window 720h0m0s, expired false
	// "scratch": window 1h0m0s, expired true
	// "archive": window 0s, expired false
	// working: false
	// shortest: 1h0m0s
}
