package boltstore

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// BenchmarkOpen measures opening a store of n finished tasks and 10
// running ones, closed cleanly, in its parts: the page check
// (checkBoltFile) and the rest of Open (bbolt's own open, the free page
// list, the log).
func BenchmarkOpen(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "tasks.db")
			s, err := Open(path, time.Second)
			if err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			for w := range 16 {
				wg.Go(func() {
					for i := w; i < n+10; i += 16 {
						state := a2a.TaskStateCompleted
						if i >= n {
							state = a2a.TaskStateWorking
						}
						task := &a2a.Task{ID: a2a.TaskID("task-" + strconv.Itoa(i)), ContextID: "c" + strconv.Itoa(i%100), Status: a2a.TaskStatus{State: state},
							History: []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("a request of about this long"))}}
						snap := &tasks.Snapshot{Task: task, Owner: tasks.Owner{Principal: "p"}, Version: 1, Updated: time.Now()}
						if err := s.Append(b.Context(), snap, []a2a.Event{task}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			fi, _ := os.Stat(path)
			var check, open time.Duration
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				if err := checkBoltFile(path); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				s, err := Open(path, time.Second)
				if err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				check, open = check+t1.Sub(t0), open+t2.Sub(t1)-t1.Sub(t0) // Open checks too
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(check.Milliseconds())/float64(b.N), "check-ms")
			b.ReportMetric(float64(open.Milliseconds())/float64(b.N), "open-rest-ms")
			b.ReportMetric(float64(fi.Size())/(1<<20), "file-MiB")
		})
	}
}

// latestMeta reads the meta page of the file's last commit.
func latestMeta(t *testing.T, path string) boltMeta {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m0, ok0 := readBoltMeta(f, 0)
	m1, ok1 := readBoltMeta(f, int64(m0.pageSize))
	if !ok0 || ok1 && m1.txid > m0.txid {
		m0 = m1
	}
	return m0
}

// TestCloseSyncsFreelist checks that a clean close leaves the free page
// list in the file, for the next open to read rather than scan for, and
// that the first commit after an open drops it again (a crash then leaves
// no stale list behind).
func TestCloseSyncsFreelist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	owner := tasks.Owner{Principal: "p"}
	for i := range 2 {
		s, err := Open(path, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		task := &a2a.Task{ID: a2a.TaskID("t" + strconv.Itoa(i)), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		if err := s.Append(t.Context(), &tasks.Snapshot{Task: task, Owner: owner, Version: 1}, []a2a.Event{task}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Events(t.Context(), owner, task.ID, 0); err != nil { // waits for bbolt's commit
			t.Fatal(err)
		}
		if m := latestMeta(t, path); m.freelist != boltNoFreelist {
			t.Fatalf("open %d: a commit left the free page list (page %d) in the meta page", i, m.freelist)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if m := latestMeta(t, path); m.freelist == boltNoFreelist {
			t.Fatalf("close %d left no free page list", i)
		}
	}
}
