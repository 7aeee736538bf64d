package bench

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// anonymous is the owner the engine gives a caller without credentials, so
// tasks loaded through the store are the engine's callers' own.
var anonymous = tasks.Owner{Principal: tasks.AnonymousPrincipal}

// bulkBatch is how many events a bulk load writes in one Append.
const bulkBatch = 25_000

// eventKinds are the two series of the events curve.
var eventKinds = []string{"status", "artifact"}

// runEvents measures, at each size n, one task of n events of each kind:
// the cost of one more event (each its own Append, as a task that streams
// its progress makes them), and for the status series GetTask with
// historyLength 10.
func runEvents(ctx context.Context, opts ScaleOptions, dir string, cr *CurveReport) error {
	for _, n := range opts.Sizes[CurveEvents] {
		started := time.Now()
		pctx, cancel := context.WithTimeout(ctx, opts.PointTimeout)
		p := Point{Size: n, Metrics: map[string]float64{}}
		var err error
		for _, kind := range eventKinds {
			if err = eventsPoint(pctx, opts, filepath.Join(dir, fmt.Sprintf("events-%s-%d", kind, n)), kind, n, &p); err != nil {
				break
			}
		}
		ended := endPoint(ctx, pctx, opts, cr, p, started, err)
		cancel()
		if ended {
			return nil // the larger sizes would fail too, or take longer
		}
	}
	return nil
}

// eventOf returns the i-th event of a task of kind: a working status update
// with an agent message, or a chunk appended to artifact "out" (the first
// chunk creates it).
func eventOf(kind string, t *a2a.Task, i int) a2a.Event {
	text := "step " + strconv.Itoa(i) + " of a long task, with about as much text as a progress line has"
	if kind == "status" {
		return a2a.NewStatusUpdateEvent(t, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, t, a2a.NewTextPart(text)))
	}
	ev := a2a.NewArtifactUpdateEvent(t, "out", a2a.NewTextPart(text))
	ev.Append = i > 0
	return ev
}

func eventsPoint(ctx context.Context, opts ScaleOptions, dir, kind string, n int, p *Point) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(dir, "tasks.db")
	st, err := boltstore.Open(path, 5*time.Second)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			st.Close()
		}
	}()
	phase := time.Now()
	progress := func(what string) {
		fmt.Fprintf(opts.Progress, "bench scale: events n=%d %s: %s in %s\n", n, kind, what, time.Since(phase).Round(100*time.Millisecond))
		phase = time.Now()
	}
	task := &a2a.Task{ID: a2a.NewTaskID(), ContextID: a2a.NewContextID(), Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
		History: []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("run the long job"))}}
	snap, err := tasks.Apply(nil, task, time.Now())
	if err != nil {
		return err
	}
	snap.Owner = anonymous
	if err := st.Append(ctx, snap, []a2a.Event{task}); err != nil {
		return err
	}
	// The load: n events in batches, a record write per batch.
	batch := make([]a2a.Event, 0, bulkBatch)
	for i := range n {
		ev := eventOf(kind, task, i)
		if snap, err = tasks.Apply(snap, ev, time.Now()); err != nil {
			return err
		}
		batch = append(batch, ev)
		if len(batch) == cap(batch) || i == n-1 {
			if err := st.Append(ctx, snap, batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
		if ctx.Err() != nil {
			return errPointTimeout
		}
	}
	// Closed and opened again, so the load's background work is done
	// before the measure starts and does not count in its bytes.
	closed = true
	if err := st.Close(); err != nil {
		return err
	}
	if st, err = boltstore.Open(path, 5*time.Second); err != nil {
		return err
	}
	closed = false
	if snap, err = st.Get(ctx, anonymous, task.ID); err != nil {
		return err
	}
	progress("loaded, closed, opened and read")
	i := n
	appendOne := func() error {
		ev := eventOf(kind, task, i)
		i++
		next, err := tasks.Apply(snap, ev, time.Now())
		if err != nil {
			return err
		}
		next.Owner = anonymous
		if err := st.Append(ctx, next, []a2a.Event{ev}); err != nil {
			return err
		}
		snap = next
		return nil
	}
	if err := appendOne(); err != nil { // the store's encoding cache warms up
		return err
	}
	// The log's segments are zero-filled ahead of use, 16 MiB a time, in
	// the background: the bytes counted are the appends' own, so the
	// measure starts once the spare segment is full and leaves out the
	// spares filled meanwhile.
	spare := watchSpare(path)
	if err := spare.full(ctx); err != nil {
		return err
	}
	written := writtenBytes()
	ds, err := timed(ctx, opts.Measure, 1000, appendOne)
	if err != nil {
		return err
	}
	// Closing waits for bbolt to take the appends up: their bytes count.
	closed = true
	err = errors.Join(st.Close(), spare.full(ctx))
	fills := spare.stop()
	if err != nil {
		return err
	}
	progress(fmt.Sprintf("%d appends measured", len(ds)))
	p.set(kind+".append_us", micros(ds))
	p.set(kind+".bytes_per_event", float64(writtenBytes()-written-fills*walSegmentSize)/float64(len(ds)))
	if kind != "status" {
		return nil // GetTask returns every artifact whatever historyLength says
	}

	if st, err = boltstore.Open(path, 5*time.Second); err != nil {
		return err
	}
	closed = false
	// Finished first: an engine holds an unfinished task in memory, and
	// GetTask would not read the store at all.
	done := a2a.NewStatusUpdateEvent(task, a2a.TaskStateCompleted, nil)
	if snap, err = tasks.Apply(snap, done, time.Now()); err != nil {
		return err
	}
	snap.Owner = anonymous
	if err := st.Append(ctx, snap, []a2a.Event{done}); err != nil {
		return err
	}
	e, err := tasks.NewEngine(ctx, st, idleExec{}, tasks.WithLogger(quietLog))
	if err != nil {
		return err
	}
	defer e.Shutdown(context.WithoutCancel(ctx))
	ten := 10
	ds, err = timed(ctx, opts.Measure, 1000, func() error {
		t, err := e.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID, HistoryLength: &ten})
		if err != nil {
			return err
		}
		if len(t.History) != ten {
			return fmt.Errorf("GetTask with historyLength 10 returned %d history entries", len(t.History))
		}
		return nil
	})
	if err != nil {
		return err
	}
	progress(fmt.Sprintf("engine started and %d GetTask measured", len(ds)))
	p.set("status.get10_us", micros(ds))
	return nil
}

// idleExec is the executor of the engines the store curves open: their
// tasks never run, and a task found running at start-up is failed by the
// engine (idleExec does not resume).
type idleExec struct{}

func (idleExec) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (idleExec) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// walSegmentSize is the size of the embedded store's log segments
// (boltstore's walSegmentMax).
const walSegmentSize = 16 << 20

// spareWatch counts the spare log segments the store fills.
type spareWatch struct {
	path  string
	done  chan struct{}
	fills chan int64
}

// watchSpare watches the spare segment of the store at storePath.
func watchSpare(storePath string) *spareWatch {
	w := &spareWatch{path: storePath + ".wal.spare", done: make(chan struct{}), fills: make(chan int64, 1)}
	first := inode(w.path)
	go func() {
		seen := map[uint64]bool{first: true, 0: true}
		var n int64
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.done:
				if ino := inode(w.path); !seen[ino] {
					n++
				}
				w.fills <- n
				return
			case <-t.C:
				if ino := inode(w.path); !seen[ino] {
					seen[ino] = true
					n++
				}
			}
		}
	}()
	return w
}

// full waits until no spare is being filled: none, or one of full size.
func (w *spareWatch) full(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		fi, err := os.Stat(w.path)
		if err != nil || fi.Size() >= walSegmentSize {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return errPointTimeout
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// stop ends the watch and returns how many spares were filled during it.
func (w *spareWatch) stop() int64 {
	close(w.done)
	return <-w.fills
}

func inode(path string) uint64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
