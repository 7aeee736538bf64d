package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
)

// generator is the load generator: one HTTP client per protocol, shared by
// the workers and the targets, so connections are reused across requests.
type generator struct {
	http *http.Client // JSON-RPC over HTTP/1.1 keep-alive
	h2c  *http.Client // gRPC over HTTP/2 without TLS
	seq  atomic.Uint64
}

func newGenerator(maxConcurrency int) *generator {
	h1 := &http.Transport{
		// One idle connection per worker: no worker ever waits for a
		// connection or pays a new handshake in the measured window.
		MaxIdleConns:        3 * maxConcurrency,
		MaxIdleConnsPerHost: maxConcurrency,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	h2 := &http.Transport{Protocols: new(http.Protocols), DisableCompression: true}
	h2.Protocols.SetUnencryptedHTTP2(true)
	return &generator{http: &http.Client{Transport: h1}, h2c: &http.Client{Transport: h2}}
}

func (g *generator) close() {
	g.http.CloseIdleConnections()
	g.h2c.CloseIdleConnections()
}

// A caller makes one request and checks its answer, which it returns (nil
// for gRPC) until its next call. Each worker has its own caller, since a
// caller keeps its buffers from one request to the next.
type caller func(ctx context.Context) ([]byte, error)

var (
	completedState = []byte(`"TASK_STATE_COMPLETED"`)
	errorMember    = []byte(`"error":`)
	dataField      = []byte("data:")
)

// callers returns the maker of scenario sc's callers against t.
func (g *generator) callers(sc Scenario, t *target) func() caller {
	if sc == GRPC {
		return func() caller {
			return func(ctx context.Context) ([]byte, error) {
				res, err := t.grpc.CallUnary(ctx, connect.NewRequest(g.grpcRequest()))
				if err != nil {
					return nil, err
				}
				if state := res.Msg.GetTask().GetStatus().GetState(); state != a2apb.TaskState_TASK_STATE_COMPLETED {
					return nil, fmt.Errorf("answer is a task in state %s, want completed", state)
				}
				return nil, nil
			}
		}
	}
	url := t.rpcURL[sc]
	return func() caller {
		header := http.Header{}
		header.Set("Content-Type", "application/json")
		header.Set("A2A-Version", "1.0")
		var body []byte
		check := checkAnswer
		switch sc {
		case Stream:
			header.Set("Accept", "text/event-stream")
			check = checkStream
		case Get:
			body = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":%q}}`, t.taskID)
		}
		answer := new(bytes.Buffer)
		return func(ctx context.Context) ([]byte, error) {
			switch sc {
			case Send:
				body = g.messageBody(body, "SendMessage")
			case Stream:
				body = g.messageBody(body, "SendStreamingMessage")
			}
			if err := g.post(ctx, url, header, body, answer); err != nil {
				return nil, err
			}
			return answer.Bytes(), check(answer.Bytes())
		}
	}
}

// messageBody writes into buf a JSON-RPC request sending a text message with
// a new message id: only the id is formatted per request, so the generator
// costs the targets little.
func (g *generator) messageBody(buf []byte, method string) []byte {
	buf = append(buf[:0], `{"jsonrpc":"2.0","id":1,"method":"`...)
	buf = append(buf, method...)
	buf = append(buf, `","params":{"message":{"messageId":"bench-`...)
	buf = strconv.AppendUint(buf, g.seq.Add(1), 10)
	return append(buf, `","role":"ROLE_USER","parts":[{"text":"bench"}]}}}`...)
}

func (g *generator) grpcRequest() *a2apb.SendMessageRequest {
	return &a2apb.SendMessageRequest{Message: &a2apb.Message{
		MessageId: "bench-" + strconv.FormatUint(g.seq.Add(1), 10),
		Role:      a2apb.Role_ROLE_USER,
		Parts:     []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "bench"}}},
	}}
}

// post sends one JSON-RPC request and reads the whole answer into answer:
// for a stream, reading to the end is reading to the final event, after
// which the server ends the response.
func (g *generator) post(ctx context.Context, url string, header http.Header, body []byte, answer *bytes.Buffer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = header
	res, err := g.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	answer.Reset()
	if _, err := answer.ReadFrom(res.Body); err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %.200s", res.StatusCode, answer.Bytes())
	}
	return nil
}

// checkAnswer accepts a JSON-RPC answer carrying a completed task. A byte
// search, not a decode: the generator must not dominate the targets' cost.
func checkAnswer(b []byte) error {
	if bytes.Contains(b, errorMember) || !bytes.Contains(b, completedState) {
		return fmt.Errorf("answer is not a completed task: %.200s", b)
	}
	return nil
}

// checkStream accepts a stream whose last event carries a completed task.
func checkStream(b []byte) error {
	last := bytes.LastIndex(b, dataField)
	if last < 0 {
		return fmt.Errorf("stream has no event: %.200s", b)
	}
	return checkAnswer(b[last:])
}

// createTask sends t one message and keeps the id of the task it made, for
// the get scenario to read.
func (g *generator) createTask(ctx context.Context, t *target) error {
	body, err := g.callers(Send, t)()(ctx)
	if err != nil {
		return fmt.Errorf("create a task on %s: %w", t.name, err)
	}
	var res struct {
		Result struct {
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &res); err != nil || res.Result.Task.ID == "" {
		return fmt.Errorf("create a task on %s: no task id in %.200s", t.name, body)
	}
	t.taskID = res.Result.Task.ID
	return nil
}

// load is what one stretch of load measured.
type load struct {
	ok, errors int64
	firstError error
	elapsed    time.Duration
	latencies  []time.Duration // of the requests answered correctly, unsorted
	mallocs    uint64          // heap allocations of the whole process
}

// add counts o's requests in l.
func (l *load) add(o load) {
	l.ok += o.ok
	l.errors += o.errors
	if l.firstError == nil {
		l.firstError = o.firstError
	}
	l.elapsed += o.elapsed
	l.latencies = append(l.latencies, o.latencies...)
	l.mallocs += o.mallocs
}

// drive runs concurrency workers, each making requests one after another
// until d has passed, and measures them. Requests still running well after
// d (a stuck target) are cancelled and count as errors.
func drive(ctx context.Context, concurrency int, d time.Duration, newCaller func() caller) load {
	ctx, cancel := context.WithTimeout(ctx, d+10*time.Second)
	defer cancel()
	type worker struct {
		call       caller
		latencies  []time.Duration
		errors     int64
		firstError error
	}
	workers := make([]*worker, concurrency)
	for i := range workers {
		// Sized before the allocation count starts, so the generator's own
		// growth barely shows in it.
		workers[i] = &worker{call: newCaller(), latencies: make([]time.Duration, 0, 4096)}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				t0 := time.Now()
				if t0.After(end) {
					return
				}
				if _, err := w.call(ctx); err != nil {
					w.errors++
					if w.firstError == nil {
						w.firstError = err
					}
					continue
				}
				w.latencies = append(w.latencies, time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	l := load{elapsed: elapsed, mallocs: after.Mallocs - before.Mallocs}
	for _, w := range workers {
		l.latencies = append(l.latencies, w.latencies...)
		l.errors += w.errors
		if l.firstError == nil {
			l.firstError = w.firstError
		}
	}
	l.ok = int64(len(l.latencies))
	return l
}

// percentile returns the nearest-rank p-th percentile of sorted latencies.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(float64(len(sorted))*p/100)) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
