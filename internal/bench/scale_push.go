package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
	"github.com/handoff-a2a/handoff/push"
	"github.com/handoff-a2a/handoff/push/webhook"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// pushRounds is how many events per webhook the latency is measured on.
const pushRounds = 20

// pushBatch is how many events one Append of the push curve's backlog
// writes: the load is not measured.
const pushBatch = 256

// runPush measures, at each size n, n webhooks (each its own HTTP server
// on 127.0.0.1, each the push config of its own task on the embedded
// store): events appended to the tasks and delivered by the dispatcher,
// then the same bodies posted by a bare net/http client, one sender per
// webhook in order as the dispatcher sends, to the same receivers.
func runPush(ctx context.Context, opts ScaleOptions, dir string, cr *CurveReport) error {
	for _, n := range opts.Sizes[CurvePush] {
		started := time.Now()
		pctx, cancel := context.WithTimeout(ctx, opts.PointTimeout)
		p := Point{Size: n}
		err := pushPoint(pctx, opts, filepath.Join(dir, fmt.Sprintf("push-%d", n)), n, &p)
		ended := endPoint(ctx, pctx, opts, cr, p, started, err)
		cancel()
		if ended {
			return nil
		}
	}
	return nil
}

// pushReceivers are the webhooks of a point. Each notes when it first got
// each delivery (by its delivery id TASK/CONFIG/SEQ), and counts every POST.
type pushReceivers struct {
	urls    []string
	servers []*http.Server
	posts   atomic.Int64
	// got[i][seq] is when webhook i first got event seq, in UnixNano; 0
	// while it has not.
	got [][]atomic.Int64
	// unique counts the first receipts.
	unique atomic.Int64
}

func startReceivers(n, events int) (*pushReceivers, error) {
	r := &pushReceivers{got: make([][]atomic.Int64, n)}
	for i := range n {
		r.got[i] = make([]atomic.Int64, events+2)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			r.close()
			return nil, fmt.Errorf("listen for webhook %d: %w", i, err)
		}
		srv := &http.Server{Handler: r.handler(i), ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln) //nolint:errcheck // ends with ErrServerClosed on close
		r.servers = append(r.servers, srv)
		r.urls = append(r.urls, "http://"+ln.Addr().String()+"/hook")
	}
	return r, nil
}

func (r *pushReceivers) handler(i int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		now := time.Now().UnixNano()
		r.posts.Add(1)
		id := req.Header.Get(webhook.HeaderDeliveryID) // absent from the bare client's posts
		if k := strings.LastIndexByte(id, '/'); k >= 0 {
			if seq, err := strconv.Atoi(id[k+1:]); err == nil && seq >= 0 && seq < len(r.got[i]) {
				if r.got[i][seq].CompareAndSwap(0, now) {
					r.unique.Add(1)
				}
			}
		}
	})
}

func (r *pushReceivers) close() {
	for _, s := range r.servers {
		s.Close()
	}
}

// waitFor polls until cond holds, ctx ends (errPointTimeout) or nothing
// progresses for stall.
func waitFor(ctx context.Context, progress func() int64, want int64, stall time.Duration) error {
	last, since := progress(), time.Now()
	for {
		v := progress()
		if v >= want {
			return nil
		}
		if v != last {
			last, since = v, time.Now()
		}
		if time.Since(since) > stall {
			return fmt.Errorf("stalled at %d of %d", v, want)
		}
		select {
		case <-ctx.Done():
			return errPointTimeout
		case <-time.After(200 * time.Microsecond):
		}
	}
}

// cpuTime is the CPU time the process has used, user and system: both the
// sender's and the receivers' side, which are in this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// appendEvents appends evs to the task of *snap, pushBatch per Append,
// calling committed (if not nil) with the time each Append returned.
func appendEvents(ctx context.Context, st *boltstore.Store, snap **tasks.Snapshot, evs []a2a.Event, committed func(at int64)) error {
	for j := 0; j < len(evs); j += pushBatch {
		batch := evs[j:min(j+pushBatch, len(evs))]
		next := *snap
		for _, ev := range batch {
			var err error
			if next, err = tasks.Apply(next, ev, time.Now()); err != nil {
				return err
			}
		}
		next.Owner = anonymous
		if err := st.Append(ctx, next, batch); err != nil {
			return err
		}
		*snap = next
		if committed != nil {
			committed(time.Now().UnixNano())
		}
	}
	return nil
}

func pushPoint(ctx context.Context, opts ScaleOptions, dir string, n int, p *Point) error {
	// Enough events for about Measure at the bare client's speed over 8 (a
	// fraction of the 30,000 posts a second it makes here to one webhook),
	// spread over the webhooks.
	total := max(256, int(opts.Measure.Seconds()*4096))
	perHook := max(32, total/n)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("push: make the data directory: %w", err)
	}
	st, err := boltstore.Open(filepath.Join(dir, "tasks.db"), 5*time.Second)
	if err != nil {
		return fmt.Errorf("push: open the store: %w", err)
	}
	defer st.Close()
	recv, err := startReceivers(n, perHook+pushRounds)
	if err != nil {
		return err
	}
	defer recv.close()
	key, err := agentcard.GenerateKey(jose.EdDSA, "bench")
	if err != nil {
		return fmt.Errorf("push: key: %w", err)
	}
	keys, err := agentcard.NewKeySet(time.Hour, agentcard.Key{JWK: key, NotBefore: time.Now().Add(-time.Minute)})
	if err != nil {
		return fmt.Errorf("push: key set: %w", err)
	}

	// One working task per webhook, with its push config, and the events
	// that will be appended (the bodies the bare client posts).
	snaps := make([]*tasks.Snapshot, n)
	evs := make([][]a2a.Event, n)
	bodies := make([][][]byte, n)
	for i := range n {
		t := &a2a.Task{ID: a2a.NewTaskID(), ContextID: a2a.NewContextID(), Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		snap, err := tasks.Apply(nil, t, time.Now())
		if err != nil {
			return err
		}
		snap.Owner = anonymous
		if err := st.Append(ctx, snap, []a2a.Event{t}); err != nil {
			return fmt.Errorf("push: create task %d: %w", i, err)
		}
		if err := st.PutPushConfig(ctx, anonymous, &a2a.PushConfig{TaskID: t.ID, ID: "hook", URL: recv.urls[i], Token: "bench-token"}); err != nil {
			return fmt.Errorf("push: config of task %d: %w", i, err)
		}
		snaps[i] = snap
		for j := range perHook + pushRounds {
			ev := a2a.NewArtifactUpdateEvent(t, "out", a2a.NewTextPart("chunk "+strconv.Itoa(j)+" of the task's output, about as long as a line of a report"))
			ev.Append = j > 0
			evs[i] = append(evs[i], ev)
			body, err := (a2a.StreamResponse{Event: ev}).MarshalJSON()
			if err != nil {
				return err
			}
			if j < perHook {
				bodies[i] = append(bodies[i], body)
			}
		}
	}

	// Throughput: the events are appended, then the dispatcher starts and
	// delivers the backlog through the SSRF guard's client, signed, each
	// webhook's events in order. One task's appends are slower than the
	// deliveries: appended live, they would measure the store, not push.
	for i := range n {
		if err := appendEvents(ctx, st, &snaps[i], evs[i][:perHook], nil); err != nil {
			return fmt.Errorf("push: append to task %d: %w", i, err)
		}
	}
	guard := push.NewGuard([]string{"127.0.0.1"})
	d := push.NewDispatcher(st, push.NewSigner(keys, "http://agent.bench"), guard.Client(10*time.Second),
		push.WithLogger(slog.New(slog.NewTextHandler(opts.Progress, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	dctx, cancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	cpu0 := cpuTime()
	start := time.Now()
	go func() { _ = d.Run(dctx); close(ran) }() // Run fails only on reading the store, which the deliveries' wait shows
	stop := sync.OnceFunc(func() { cancel(); <-ran })
	defer stop()
	want := int64(n * perHook)
	if err := waitFor(ctx, recv.unique.Load, want, 30*time.Second); err != nil {
		return fmt.Errorf("push: deliveries: %w", err)
	}
	elapsed, cpu := time.Since(start), cpuTime()-cpu0

	// Latency: one event appended to every task at once, each Append
	// followed by the engine's commit notice, from its commit to its
	// webhook's receipt; pushRounds times.
	var lat []time.Duration
	committed := make([]int64, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range pushRounds {
		for i := range n {
			wg.Go(func() {
				errs[i] = appendEvents(ctx, st, &snaps[i], evs[i][perHook+r:perHook+r+1], func(at int64) { committed[i] = at; d.Notify(snaps[i].Task.ID) })
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("push: append: %w", err)
		}
		if err := waitFor(ctx, recv.unique.Load, want+int64(n*(r+1)), 30*time.Second); err != nil {
			return fmt.Errorf("push: deliveries: %w", err)
		}
		seq := 1 + perHook + r + 1 // event 1 created the task
		for i := range n {
			lat = append(lat, time.Duration(recv.got[i][seq].Load()-committed[i]))
		}
	}
	slices.Sort(lat)
	stop()
	dispatched := recv.posts.Load()
	want += int64(n * pushRounds)

	// The bare client: the same bodies to the same receivers, one sender
	// per webhook, in order, with keep-alive.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	bareLat := make([][]time.Duration, n)
	cpu0 = cpuTime()
	start = time.Now()
	for i := range n {
		wg.Go(func() {
			for _, body := range bodies[i] {
				t0 := time.Now()
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, recv.urls[i], strings.NewReader(string(body)))
				if err != nil {
					errs[i] = err
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					errs[i] = fmt.Errorf("push: bare post to webhook %d: %w", i, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				bareLat[i] = append(bareLat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	bareElapsed, bareCPU := time.Since(start), cpuTime()-cpu0
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if got := recv.posts.Load() - dispatched; got != int64(n*perHook) {
		return fmt.Errorf("push: bare client: %d posts received, want %d", got, n*perHook)
	}
	bl := slices.Concat(bareLat...)
	slices.Sort(bl)

	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	rate := float64(n*perHook) / elapsed.Seconds()
	bare := float64(n*perHook) / bareElapsed.Seconds()
	p.set("deliveries_per_s", rate)
	p.set("bare_posts_per_s", bare)
	p.set("vs_bare", rate/bare)
	p.set("delivery_p50_ms", ms(percentile(lat, 50)))
	p.set("delivery_p99_ms", ms(percentile(lat, 99)))
	p.set("bare_p50_ms", ms(percentile(bl, 50)))
	p.set("bare_p99_ms", ms(percentile(bl, 99)))
	// CPU time per delivery holds still when other work shares the cores,
	// which the rates do not.
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n*perHook) }
	p.set("cpu_us_per_delivery", us(cpu))
	p.set("bare_cpu_us_per_post", us(bareCPU))
	p.set("posts_per_delivery", float64(dispatched)/float64(want)) // above 1: sent again
	return nil
}
