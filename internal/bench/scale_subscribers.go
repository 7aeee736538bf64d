package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff"
)

// holdConfig is the subscribers curve's agent: one Go skill whose task
// stays working until the run ends, an event each time the run asks.
const holdConfig = `name: Handoff Scale Agent
description: Holds one task open and streams an event to its subscribers on demand.
auth:
  anonymous: true
capabilities:
  streaming: true
limits:
  executor_idle_timeout: 0s
server:
  max_connections: %d
  max_connections_per_ip: 0
skills:
  - id: hold
    name: Hold
    executor: go
`

// fanoutTicks is how many events each point fans out.
const fanoutTicks = 5

// holdExec keeps its task working and yields a status update "tick-N" for
// each value sent on ticks.
type holdExec struct{ ticks chan int }

func (h holdExec) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) || !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case n := <-h.ticks:
				msg := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("tick-"+strconv.Itoa(n)))
				if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, msg), nil) {
					return
				}
			}
		}
	}
}

func (holdExec) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// sseTarget is a server the subscribers curve opens streams on.
type sseTarget struct {
	addr    string
	request []byte      // the raw HTTP request that opens one stream
	tick    func(n int) // makes the server send event "tick-n" to every stream
	stop    func() error
}

// runSubscribers opens, at each size n, n idle streams on Handoff and on a
// bare net/http SSE handler in turn, and measures the memory each stream
// holds and the delivery of one event to all of them.
func runSubscribers(ctx context.Context, opts ScaleOptions, cr *CurveReport) (err error) {
	sizes := opts.Sizes[CurveSubscribers]
	// Both ends of every stream are in this process, and the server keeps a
	// spare.
	limit, err := raiseFileLimit(uint64(4*slices.Max(sizes) + 1024))
	if err != nil {
		return err
	}
	if need := uint64(2*slices.Max(sizes) + 512); limit < need {
		return fmt.Errorf("%d streams take about %d open files in this process (both ends, and the agent's own); the limit is %d and cannot be raised further: ask for fewer (--sizes subscribers=...)",
			slices.Max(sizes), need, limit)
	}
	h, err := startHold(ctx, 2*slices.Max(sizes)+64)
	if err != nil {
		return fmt.Errorf("start Handoff: %w", err)
	}
	defer func() { err = errors.Join(err, h.stop()) }()
	bare, err := startBareSSE()
	if err != nil {
		return fmt.Errorf("start the bare SSE server: %w", err)
	}
	defer func() { err = errors.Join(err, bare.stop()) }()
	tickN := 0
	for _, n := range sizes {
		started := time.Now()
		p := Point{Size: n, Metrics: map[string]float64{}}
		pctx, cancel := context.WithTimeout(ctx, opts.PointTimeout)
		for _, t := range []struct {
			prefix string
			sse    *sseTarget
		}{{"", h}, {"bare_", bare}} {
			var m streamFigures
			m, err = measureStreams(pctx, t.sse, n, &tickN)
			if err != nil {
				err = fmt.Errorf("%sstreams: %w", t.prefix, err)
				break
			}
			p.set(t.prefix+"heap_per_stream_bytes", m.heapPerStream)
			p.set(t.prefix+"stacks_per_stream_bytes", m.stackPerStream)
			p.set(t.prefix+"rss_per_stream_bytes", m.rssPerStream)
			p.set(t.prefix+"fanout_p50_ms", m.p50)
			p.set(t.prefix+"fanout_p99_ms", m.p99)
		}
		ended := endPoint(ctx, pctx, opts, cr, p, started, err)
		cancel()
		if ended {
			return nil // the larger sizes would fail too, or take longer
		}
	}
	return nil
}

// startHold serves the hold agent and starts its task.
func startHold(ctx context.Context, maxConns int) (*sseTarget, error) {
	cfg, err := handoff.ParseConfig("scale agent", strings.NewReader(fmt.Sprintf(holdConfig, maxConns)))
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "handoff-bench-subscribers-")
	if err != nil {
		return nil, err
	}
	cfg.DataDir = dir
	exec := holdExec{ticks: make(chan int)}
	agent, err := handoff.New(ctx, cfg, handoff.WithExecutor("hold", exec), handoff.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		agent.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	serveCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- agent.Serve(serveCtx, ln) }()
	stop := func() error {
		cancel()
		return errors.Join(<-served, os.RemoveAll(dir))
	}
	url := "http://" + ln.Addr().String() + jsonrpcPath
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"hold","role":"ROLE_USER","parts":[{"text":"hold"}]},"configuration":{"returnImmediately":true}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, errors.Join(err, stop())
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, errors.Join(err, stop())
	}
	var answer struct {
		Result struct {
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		} `json:"result"`
	}
	err = json.NewDecoder(res.Body).Decode(&answer)
	res.Body.Close()
	if err != nil || answer.Result.Task.ID == "" {
		return nil, errors.Join(fmt.Errorf("start the held task: no task id in the answer (%v)", err), stop())
	}
	sub := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":%q}}`, answer.Result.Task.ID)
	return &sseTarget{
		addr:    ln.Addr().String(),
		request: streamRequest(ln.Addr().String(), jsonrpcPath, sub),
		tick:    func(n int) { exec.ticks <- n },
		stop:    stop,
	}, nil
}

func streamRequest(addr, path, body string) []byte {
	return fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nAccept: text/event-stream\r\nContent-Length: %d\r\n\r\n%s",
		path, addr, len(body), body)
}

// startBareSSE serves the least an SSE server can do: headers, one event,
// then each tick to every stream.
func startBareSSE() (*sseTarget, error) {
	var (
		mu    sync.Mutex
		ch    = make(chan struct{})
		value int
	)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		// Taken before the first event, which tells the client the stream
		// is open: no tick after it is missed.
		mu.Lock()
		wait := ch
		mu.Unlock()
		_, _ = w.Write([]byte("data: {\"hello\":true}\n\n"))
		fl.Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-wait:
			}
			mu.Lock()
			n := value
			wait = ch
			mu.Unlock()
			if _, err := fmt.Fprintf(w, "data: {\"tick\":\"tick-%d\"}\n\n", n); err != nil {
				return
			}
			fl.Flush()
		}
	})
	base, stop, err := startHTTP(h)
	if err != nil {
		return nil, err
	}
	addr := strings.TrimPrefix(base, "http://")
	return &sseTarget{
		addr:    addr,
		request: streamRequest(addr, "/", "{}"),
		tick: func(n int) {
			mu.Lock()
			value = n
			close(ch)
			ch = make(chan struct{})
			mu.Unlock()
		},
		stop: stop,
	}, nil
}

type streamFigures struct {
	heapPerStream, stackPerStream, rssPerStream float64
	p50, p99                                    float64 // ms
}

// measureStreams opens n streams on t, each read to its first event and
// then left idle, and measures the memory they hold (heap and stacks, and
// RSS, over n: the client ends are raw connections with no goroutine and
// next to no memory of their own; heap counts the goroutines' stacks too,
// stacks counts them alone); then fans out fanoutTicks events to all
// of them and measures each delivery's latency.
func measureStreams(ctx context.Context, t *sseTarget, n int, tickN *int) (_ streamFigures, err error) {
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		// The server's ends close before the next measure starts.
		time.Sleep(200 * time.Millisecond)
	}()
	heap0, stack0, rss0 := memNow()
	var d net.Dialer
	buf := make([]byte, 8192)
	for range n {
		c, err := d.DialContext(ctx, "tcp", t.addr)
		if err != nil {
			return streamFigures{}, err
		}
		conns = append(conns, c)
		if _, err := c.Write(t.request); err != nil {
			return streamFigures{}, err
		}
		if err := readFirstEvent(ctx, c, buf); err != nil {
			return streamFigures{}, fmt.Errorf("stream %d: %w", len(conns), err)
		}
	}
	heap1, stack1, rss1 := memNow()
	f := streamFigures{
		heapPerStream:  float64(heap1-heap0) / float64(n),
		stackPerStream: float64(stack1-stack0) / float64(n),
		rssPerStream:   float64(rss1-rss0) / float64(n),
	}

	// One reader per stream, each noting when it sees each tick.
	type seen struct {
		tick int
		at   time.Time
	}
	got := make(chan seen, n*fanoutTicks)
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			r := bufio.NewReaderSize(c, 4096)
			for {
				line, err := r.ReadSlice('\n')
				if err != nil {
					return
				}
				if i := bytes.Index(line, []byte("tick-")); i >= 0 {
					digits := line[i+len("tick-"):]
					end := 0
					for end < len(digits) && digits[end] >= '0' && digits[end] <= '9' {
						end++
					}
					k, _ := strconv.Atoi(string(digits[:end]))
					got <- seen{k, time.Now()}
				}
			}
		})
	}
	defer wg.Wait()
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var lat []time.Duration
	for range fanoutTicks {
		*tickN++
		k := *tickN
		t0 := time.Now()
		select {
		case <-ctx.Done():
			return f, errPointTimeout
		default:
		}
		t.tick(k)
		timeout := time.After(30 * time.Second)
		for received := 0; received < n; {
			select {
			case s := <-got:
				if s.tick == k {
					lat = append(lat, s.at.Sub(t0))
					received++
				}
			case <-timeout:
				return f, fmt.Errorf("tick %d reached %d of %d streams in 30s", k, received, n)
			case <-ctx.Done():
				return f, errPointTimeout
			}
		}
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	f.p50, f.p99 = ms(percentile(lat, 50)), ms(percentile(lat, 99))
	return f, nil
}

// readFirstEvent reads c until the end of its first server-sent event.
func readFirstEvent(ctx context.Context, c net.Conn, buf []byte) error {
	deadline := time.Now().Add(30 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.SetReadDeadline(deadline)
	defer c.SetReadDeadline(time.Time{})
	have := 0
	for {
		m, err := c.Read(buf[have:])
		have += m
		b := buf[:have]
		if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
			if !bytes.HasPrefix(b, []byte("HTTP/1.1 200")) {
				return fmt.Errorf("answer %.100q", b)
			}
			if j := bytes.Index(b[i:], []byte("data:")); j >= 0 && bytes.Contains(b[i+j:], []byte("\n\n")) {
				return nil
			}
		}
		if err != nil {
			return fmt.Errorf("read the first event: %w (read %.200q)", err, b)
		}
		if have == len(buf) {
			return fmt.Errorf("first event longer than %d bytes", len(buf))
		}
	}
}

// memNow returns, after a collection, the heap and goroutine stack memory
// in use (heap counts both) and the process's resident set, in bytes.
func memNow() (heap, stacks, rss int64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse + ms.StackInuse), int64(ms.StackInuse), residentBytes()
}

// residentBytes is the process's resident set (VmRSS), or 0.
func residentBytes() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
