package boltstore

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// writtenBytes is what the process has written through write calls.
func writtenBytes(tb testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		tb.Skip("no /proc/self/io")
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "wchar:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			return n
		}
	}
	tb.Skip("no wchar in /proc/self/io")
	return 0
}

// BenchmarkLongTask measures one more event, each its own Append, on a
// task already holding n events (loaded in writes of loadBatch, then the store closed
// and opened again, the task read back as a restarted engine reads it),
// for status updates (history) and artifact chunks; the bytes are what the
// process wrote for the appends (log and bbolt, after Close), and get10 is
// GetRecent with 10 entries. Compare n=100000 with n=10 in one run.
func BenchmarkLongTask(b *testing.B) {
	for _, kind := range []string{"status", "artifact"} {
		for _, n := range []int{10, 1000, 100_000} {
			b.Run(kind+"/n="+strconv.Itoa(n), func(b *testing.B) { benchLongTask(b, kind, n) })
		}
	}
}

// loadBatch is how many events a write of the load holds, as in the
// bench's events curve.
const loadBatch = 25_000

func benchLongTask(b *testing.B, kind string, n int) {
	path := filepath.Join(b.TempDir(), "tasks.db")
	s, err := Open(path, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	owner := tasks.Owner{Principal: "p"}
	task := &a2a.Task{ID: "long", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	snap, err := tasks.Apply(nil, task, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	snap.Owner = owner
	if err := s.Append(ctx, snap, []a2a.Event{task}); err != nil {
		b.Fatal(err)
	}
	eventOf := func(i int) a2a.Event {
		text := "step " + strconv.Itoa(i) + " of a long task, with about as much text as a progress line has"
		if kind == "status" {
			return a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, task, a2a.NewTextPart(text)))
		}
		ev := a2a.NewArtifactUpdateEvent(task, "out", a2a.NewTextPart(text))
		ev.Append = i > 0
		return ev
	}
	var batch []a2a.Event
	for i := range n {
		ev := eventOf(i)
		if snap, err = tasks.Apply(snap, ev, time.Now()); err != nil {
			b.Fatal(err)
		}
		if batch = append(batch, ev); len(batch) == loadBatch || i == n-1 {
			if err := s.Append(ctx, snap, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if s, err = Open(path, time.Second); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if snap, err = s.Get(ctx, owner, "long"); err != nil {
		b.Fatal(err)
	}
	i := n
	stats := s.db.Stats()
	written, alloc := writtenBytes(b), stats.TxStats.GetPageAlloc()
	b.ResetTimer()
	for range b.N {
		ev := eventOf(i)
		i++
		next, err := tasks.Apply(snap, ev, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Append(ctx, next, []a2a.Event{ev}); err != nil {
			b.Fatal(err)
		}
		snap = next
	}
	b.StopTimer()
	if _, err := s.Events(ctx, owner, "long", uint64(i)); err != nil { // waits for bbolt to apply the appends
		b.Fatal(err)
	}
	stats = s.db.Stats()
	// bbolt's page writes alone: the log's count the spare segments it
	// fills ahead, 16 MiB a time.
	b.ReportMetric(float64(stats.TxStats.GetPageAlloc()-alloc)/float64(b.N), "bbolt-B/event")
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(writtenBytes(b)-written)/float64(b.N), "B/event")
	if s, err = Open(path, time.Second); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	const reads = 200
	for range reads {
		got, err := s.GetRecent(ctx, owner, "long", 10)
		if err != nil || kind == "status" && len(got.Task.History) != min(10, i) {
			b.Fatalf("GetRecent: %v", err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/reads, "get10-µs")
}
