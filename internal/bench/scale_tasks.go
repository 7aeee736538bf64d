package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

const (
	// loaders is how many goroutines bulk-load tasks: enough appends in
	// flight that each group commit of the store takes many.
	loaders = 256
	// contextSize is how many tasks share one context id.
	contextSize = 100
	// failedEvery makes one loaded task in that many failed, the state a
	// ListTasks page by state selects.
	failedEvery = 100
	// running is how many unfinished tasks each start-up finds.
	running = 10
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// runTasks loads one embedded store to each size in turn (each point adds
// to the tasks of the one before) and measures, at each, the start-up of
// the store and an engine on it with 10 unfinished tasks, GetTask of loaded
// tasks, and a page of ListTasks by state and by context.
func runTasks(ctx context.Context, opts ScaleOptions, dir string, cr *CurveReport) (err error) {
	if err := os.MkdirAll(filepath.Join(dir, "tasks"), 0o700); err != nil {
		return err
	}
	path := filepath.Join(dir, "tasks", "tasks.db")
	st, err := boltstore.Open(path, 5*time.Second)
	if err != nil {
		return err
	}
	defer func() {
		if st != nil {
			err = errors.Join(err, st.Close())
		}
	}()
	loaded := 0
	var ids []a2a.TaskID // a sample of the loaded tasks, for GetTask
	for _, n := range opts.Sizes[CurveTasks] {
		started := time.Now()
		pctx, cancel := context.WithTimeout(ctx, opts.PointTimeout)
		p := Point{Size: n, Metrics: map[string]float64{}}
		var sample []a2a.TaskID
		sample, err = loadTasks(pctx, st, loaded, n)
		ids = append(ids, sample...)
		if err == nil {
			p.set("load_tasks_per_s", float64(n-loaded)/time.Since(started).Seconds())
			loaded = n
			err = tasksPoint(pctx, opts, path, &st, ids, &p)
		}
		ended := endPoint(ctx, pctx, opts, cr, p, started, err)
		cancel()
		if ended {
			return nil // the larger sizes would fail too, or take longer
		}
	}
	return nil
}

// loadTasks appends tasks from..to-1 to st, each a finished task in its own
// Append, from many goroutines, and returns a sample of their ids.
func loadTasks(ctx context.Context, st tasks.Store, from, to int) ([]a2a.TaskID, error) {
	var (
		next     atomic.Int64
		firstErr error
		mu       sync.Mutex
		sample   []a2a.TaskID
		wg       sync.WaitGroup
	)
	next.Store(int64(from))
	base := time.Now()
	for range loaders {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= to || ctx.Err() != nil {
					return
				}
				task := finishedTask(i)
				snap := &tasks.Snapshot{Task: task, Owner: anonymous, Version: 1, Updated: base.Add(time.Duration(i) * time.Microsecond)}
				if err := st.Append(ctx, snap, []a2a.Event{task}); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					return
				}
				if i%997 == 0 {
					mu.Lock()
					sample = append(sample, task.ID)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return sample, errPointTimeout
	}
	return sample, firstErr
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// finishedTask is the i-th loaded task: a request and its answer, in
// context i/contextSize, completed (or, one in failedEvery, failed).
func finishedTask(i int) *a2a.Task {
	id := a2a.TaskID(fmt.Sprintf("task-%09d", i))
	ctxID := "ctx-" + strconv.Itoa(i/contextSize)
	state := a2a.TaskStateCompleted
	if i%failedEvery == 0 {
		state = a2a.TaskStateFailed
	}
	t := &a2a.Task{ID: id, ContextID: ctxID}
	t.History = []*a2a.Message{a2a.NewMessageForTask(a2a.MessageRoleUser, t, a2a.NewTextPart("summarise report "+strconv.Itoa(i)))}
	t.Status = a2a.TaskStatus{State: state, Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, t, a2a.NewTextPart("done"))}
	t.Artifacts = []*a2a.Artifact{{ID: "summary", Parts: []*a2a.Part{a2a.NewTextPart("the summary of report " + strconv.Itoa(i))}}}
	return t
}

// tasksPoint adds the unfinished tasks, closes the store and measures its
// start-up with an engine, then GetTask and ListTasks through that engine.
func tasksPoint(ctx context.Context, opts ScaleOptions, path string, st **boltstore.Store, ids []a2a.TaskID, p *Point) error {
	for range running {
		t := &a2a.Task{ID: a2a.NewTaskID(), ContextID: a2a.NewContextID(), Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		snap := &tasks.Snapshot{Task: t, Owner: anonymous, Version: 1, Updated: time.Now()}
		if err := (*st).Append(ctx, snap, []a2a.Event{t}); err != nil {
			return err
		}
	}
	err := (*st).Close()
	*st = nil
	if err != nil {
		return err
	}
	t0 := time.Now()
	s, err := boltstore.Open(path, 5*time.Second)
	if err != nil {
		return err
	}
	*st = s
	e, err := tasks.NewEngine(ctx, s, idleExec{}, tasks.WithLogger(quietLog))
	if err != nil {
		return err
	}
	p.set("startup_ms", float64(time.Since(t0))/float64(time.Millisecond))
	defer e.Shutdown(context.WithoutCancel(ctx))

	i := 0
	ds, err := timed(ctx, opts.Measure, 2000, func() error {
		id := ids[i%len(ids)]
		i++
		t, err := e.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
		if err == nil && t.ID != id {
			err = fmt.Errorf("GetTask(%s) returned task %s", id, t.ID)
		}
		return err
	})
	if err != nil {
		return err
	}
	p.set("get_us", micros(ds))
	for _, q := range []struct {
		metric string
		req    func() *a2a.ListTasksRequest
	}{
		// A page of 10: the smallest size has 10 failed tasks, so every
		// size lists a full page and the ratio compares like with like.
		{"list_state_us", func() *a2a.ListTasksRequest { return &a2a.ListTasksRequest{Status: a2a.TaskStateFailed, PageSize: 10} }},
		{"list_context_us", func() *a2a.ListTasksRequest {
			i++
			return &a2a.ListTasksRequest{ContextID: "ctx-" + strconv.Itoa(i%max(1, p.Size/contextSize)), PageSize: 50}
		}},
	} {
		ds, err := timed(ctx, opts.Measure, 500, func() error {
			res, err := e.ListTasks(ctx, q.req())
			if err == nil && len(res.Tasks) == 0 {
				err = errors.New("ListTasks returned no task")
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: %w", q.metric, err)
		}
		p.set(q.metric, micros(ds))
	}
	return nil
}
