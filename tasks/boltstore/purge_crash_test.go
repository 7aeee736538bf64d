package boltstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// purgeChildEnv names the store the child of TestPurgeCrash purges.
const purgeChildEnv = "HANDOFF_TASKS_PURGE_CHILD"

// purgeKeep is the retention of TestPurgeCrash: its old tasks ended a day
// before base, its kept ones after.
var (
	purgeKeep  = tasks.Retention{Finished: time.Hour}
	purgeOwner = tasks.Owner{Principal: "purge"}
)

const (
	oldTasks  = 2000
	keptTasks = 100
)

// TestPurgeCrash kills a process with kill -9 while it purges finished
// tasks a batch at a time (and appends new tasks beside), each purge
// acknowledged on stdout, then opens its store: every task is whole (its
// snapshot, three events, its push config, its list entry) or wholly gone,
// every acknowledged purge is gone, and purging again finishes the job,
// leaving the kept tasks and consistent counts.
func TestPurgeCrash(t *testing.T) {
	if path := os.Getenv(purgeChildEnv); path != "" {
		purgeChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "tasks.db")
	now := time.Now()
	fillPurgeStore(t, path, now)

	cmd := exec.Command(os.Args[0], "-test.run=^TestPurgeCrash$")
	cmd.Env = append(os.Environ(), purgeChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	lines := bufio.NewScanner(out)
	deadline := time.Now().Add(30 * time.Second)
	for len(acked) < oldTasks/4 && time.Now().Before(deadline) && lines.Scan() {
		for _, id := range strings.Fields(lines.Text()) {
			acked[id] = true
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() { // acknowledged before the kill, still in the pipe
		for _, id := range strings.Fields(lines.Text()) {
			acked[id] = true
		}
	}
	cmd.Wait()
	if len(acked) < oldTasks/4 {
		t.Fatalf("the child acknowledged only %d purged tasks", len(acked))
	}

	s, err := boltstore.Open(path, time.Second)
	if err != nil {
		t.Fatalf("open after the kill: %v", err)
	}
	defer s.Close()
	ctx := t.Context()
	whole, gone := 0, 0
	for i := range oldTasks {
		id := a2a.TaskID(fmt.Sprintf("old-%04d", i))
		switch wholeOrGone(t, s, id) {
		case true:
			whole++
			if acked[string(id)] {
				t.Errorf("task %s acknowledged purged, but whole after the kill", id)
			}
		default:
			gone++
		}
	}
	t.Logf("after the kill: %d old tasks whole, %d gone (%d acknowledged purged)", whole, gone, len(acked))
	if whole == 0 {
		t.Fatal("the kill came after the last purge: nothing was interrupted")
	}
	// Purging again finishes the job.
	for {
		exp, err := s.Expired(ctx, purgeKeep, now, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(exp) == 0 {
			break
		}
		ids := make([]a2a.TaskID, len(exp))
		for i, e := range exp {
			ids[i] = e.ID
		}
		res, err := s.Purge(ctx, purgeKeep, now, ids)
		if err != nil || len(res.Tasks) != len(ids) {
			t.Fatalf("purge again: %d of %d, %v", len(res.Tasks), len(ids), err)
		}
	}
	for i := range oldTasks {
		if wholeOrGone(t, s, a2a.TaskID(fmt.Sprintf("old-%04d", i))) {
			t.Fatalf("old-%04d left after purging again", i)
		}
	}
	for i := range keptTasks {
		if !wholeOrGone(t, s, a2a.TaskID(fmt.Sprintf("kept-%04d", i))) {
			t.Fatalf("kept-%04d is gone", i)
		}
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	page, err := s.List(ctx, tasks.ListQuery{Owner: purgeOwner, PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if st.Tasks < keptTasks || page.TotalSize != st.Tasks || st.ByState[a2a.TaskStateCompleted] != keptTasks {
		t.Errorf("stats %+v, list total %d: want the %d kept tasks completed (and the child's new ones, working), counted alike", st, page.TotalSize, keptTasks)
	}
}

// wholeOrGone reports whether task id is whole (true) or gone (false), and
// fails the test when it is neither.
func wholeOrGone(t *testing.T, s *boltstore.Store, id a2a.TaskID) bool {
	t.Helper()
	ctx := t.Context()
	_, getErr := s.Get(ctx, purgeOwner, id)
	evs, evErr := s.Events(ctx, purgeOwner, id, 0)
	_, pushErr := s.GetPushConfig(ctx, purgeOwner, id, "hook")
	deliveries, err := s.PushDeliveries(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case getErr == nil && evErr == nil && len(evs) == 3 && pushErr == nil && len(deliveries) == 1:
		return true
	case errors.Is(getErr, tasks.ErrNotFound) && errors.Is(evErr, tasks.ErrNotFound) && errors.Is(pushErr, tasks.ErrNotFound) && len(deliveries) == 0:
		return false
	}
	t.Fatalf("task %s half there: get %v, %d events (%v), push config %v, %d deliveries", id, getErr, len(evs), evErr, pushErr, len(deliveries))
	return false
}

// fillPurgeStore writes the old tasks (finished a day before now) and the
// kept ones (finished now), each with three events and a push config.
func fillPurgeStore(t *testing.T, path string, now time.Time) {
	s, err := boltstore.Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < oldTasks+keptTasks; i += 8 {
				id, at := fmt.Sprintf("old-%04d", i), now.Add(-24*time.Hour)
				if i >= oldTasks {
					id, at = fmt.Sprintf("kept-%04d", i-oldTasks), now
				}
				if err := writeFinished(s, a2a.TaskID(id), at); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeFinished stores task id: working (two events), a push config, then
// completed at at.
func writeFinished(s *boltstore.Store, id a2a.TaskID, at time.Time) error {
	ctx := context.Background()
	task := &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
		History: []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("purge me "+strings.Repeat("x", 512)))}}
	working := a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, nil)
	if err := s.Append(ctx, &tasks.Snapshot{Task: task, Owner: purgeOwner, Version: 2, Updated: at.Add(-time.Second)}, []a2a.Event{task, working}); err != nil {
		return err
	}
	if err := s.PutPushConfig(ctx, purgeOwner, &a2a.PushConfig{TaskID: id, ID: "hook", URL: "https://hook.example/"}); err != nil {
		return err
	}
	done := a2a.NewStatusUpdateEvent(task, a2a.TaskStateCompleted, nil)
	next := *task
	next.Status = done.Status
	return s.Append(ctx, &tasks.Snapshot{Task: &next, Owner: purgeOwner, Version: 3, Updated: at}, []a2a.Event{done})
}

// purgeChild purges the expired tasks a batch at a time, printing the ids
// of each batch once purged, while another goroutine appends new tasks,
// until killed.
func purgeChild(path string) {
	s, err := boltstore.Open(path, time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx := context.Background()
	go func() {
		for i := 0; ; i++ {
			task := &a2a.Task{ID: a2a.TaskID("new-" + strconv.Itoa(i)), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
			if err := s.Append(ctx, &tasks.Snapshot{Task: task, Owner: purgeOwner, Version: 1, Updated: time.Now()}, []a2a.Event{task}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
	}()
	w := bufio.NewWriter(os.Stdout)
	for {
		exp, err := s.Expired(ctx, purgeKeep, time.Now(), 20)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		ids := make([]a2a.TaskID, len(exp))
		for i, e := range exp {
			ids[i] = e.ID
		}
		res, err := s.Purge(ctx, purgeKeep, time.Now(), ids)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, e := range res.Tasks {
			fmt.Fprint(w, e.ID, " ")
		}
		fmt.Fprintln(w)
		w.Flush()
	}
}

// BenchmarkPurge measures one purge of a hundred finished tasks (three
// events and a push config each): the time the store's write path holds
// for it. b.N batches, each written beforehand, off the clock.
func BenchmarkPurge(b *testing.B) {
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "tasks.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	for n := 0; b.Loop(); n++ {
		b.StopTimer()
		ids := make([]a2a.TaskID, 100)
		for i := range ids {
			ids[i] = a2a.TaskID(fmt.Sprintf("b%d-%03d", n, i))
			if err := writeFinished(s, ids[i], now.Add(-24*time.Hour)); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		res, err := s.Purge(b.Context(), purgeKeep, now, ids)
		if err != nil || len(res.Tasks) != len(ids) {
			b.Fatalf("purged %d of %d: %v", len(res.Tasks), len(ids), err)
		}
	}
}

// BenchmarkAppendDuringPurge measures an append and a read of it (Events,
// which waits for bbolt to apply it) while a purge deletes a backlog of
// 10,000 finished tasks in batches of 100, paced as the agent paces it,
// beside the same without the purge: p50, p99 and max in µs over the
// appends made while the purge ran.
func BenchmarkAppendDuringPurge(b *testing.B) {
	const old = 10000
	for _, purging := range []bool{false, true} {
		b.Run(map[bool]string{false: "idle", true: "purging"}[purging], func(b *testing.B) {
			s, err := boltstore.Open(filepath.Join(b.TempDir(), "tasks.db"), time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			now := time.Now()
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := g; i < old; i += 8 {
						if err := writeFinished(s, a2a.TaskID(fmt.Sprintf("old-%05d", i)), now.Add(-24*time.Hour)); err != nil {
							panic(err)
						}
					}
				})
			}
			wg.Wait()
			var active atomic.Bool
			active.Store(true)
			go func() {
				defer active.Store(false)
				for purging {
					exp, err := s.Expired(context.Background(), purgeKeep, now, 100)
					if err != nil || len(exp) == 0 {
						return
					}
					ids := make([]a2a.TaskID, len(exp))
					for i, e := range exp {
						ids[i] = e.ID
					}
					start := time.Now()
					if _, err := s.Purge(context.Background(), purgeKeep, now, ids); err != nil {
						return
					}
					time.Sleep(time.Since(start)) // the agent's purger paces a backlog so (retention.go)
				}
			}()
			var lat []time.Duration
			owner := tasks.Owner{Principal: "bench"}
			for n := 0; b.Loop(); n++ {
				id := a2a.TaskID(fmt.Sprintf("new-%d", n))
				task := &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
				t0 := time.Now()
				if err := s.Append(b.Context(), &tasks.Snapshot{Task: task, Owner: owner, Version: 1, Updated: time.Now()}, []a2a.Event{task}); err != nil {
					b.Fatal(err)
				}
				if _, err := s.Events(b.Context(), owner, id, 0); err != nil {
					b.Fatal(err)
				}
				if !purging || active.Load() {
					lat = append(lat, time.Since(t0))
				}
			}
			if len(lat) == 0 {
				b.Fatal("the purge ended before the first append")
			}
			slices.Sort(lat)
			us := func(d time.Duration) float64 { return float64(d.Microseconds()) }
			b.ReportMetric(float64(len(lat)), "samples")
			b.ReportMetric(us(lat[len(lat)/2]), "p50-µs")
			b.ReportMetric(us(lat[len(lat)*99/100]), "p99-µs")
			b.ReportMetric(us(lat[len(lat)-1]), "max-µs")
		})
	}
}
