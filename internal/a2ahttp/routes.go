package a2ahttp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	a2alog "github.com/a2aproject/a2a-go/v2/log"
	"github.com/google/uuid"

	"github.com/handoff-a2a/handoff/internal/a2ajson"
)

// protocolVersion is the A2A version a request asked for.
type protocolVersion int

const (
	version03 protocolVersion = iota
	version10
)

// requestedVersion reads the A2A-Version header. The 1.0 spec says a request
// without it is 0.3; ok is false for a version this agent does not speak.
func requestedVersion(r *http.Request) (v protocolVersion, raw string, ok bool) {
	raw = strings.TrimSpace(r.Header.Get(a2a.SvcParamVersion))
	switch raw {
	case "", "0.3", "0.3.0":
		return version03, raw, true
	case "1.0", "1", "1.0.0":
		return version10, raw, true
	}
	return 0, raw, false
}

// versioned sends each request to the handler of the A2A version it asked
// for, and answers an unknown version with VersionNotSupported (-32009) in
// the binding's own error format.
func versioned(v10, v03 http.Handler, jsonrpc bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, raw, ok := requestedVersion(r)
		switch {
		case !ok:
			msg := fmt.Sprintf("A2A-Version %q is not supported; this agent speaks 1.0 and 0.3", raw)
			if jsonrpc {
				writeJSONRPCError(w, http.StatusOK, idOf(r), -32009, msg)
			} else {
				WriteRESTError(w, http.StatusBadRequest, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED", msg)
			}
		case v == version10:
			v10.ServeHTTP(w, r)
		default:
			v03.ServeHTTP(w, r)
		}
	})
}

// idOf returns the JSON-RPC id of a buffered request body, or nil.
func idOf(r *http.Request) any {
	var env struct {
		ID any `json:"id"`
	}
	if b, ok := r.Body.(*bufferedBody); ok {
		_ = json.Unmarshal(b.data, &env)
	}
	return env.ID
}

func writeJSONRPCError(w http.ResponseWriter, status int, id any, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": msg, "data": jsonrpcErrorData(code)},
	})
}

// WriteRESTError answers in the google.rpc.Status shape a2a-go's REST
// binding uses, so its clients map the reason back to an a2a error: status
// is the HTTP status, grpcStatus its google.rpc.Code name (NOT_FOUND), reason
// the A2A error reason (TASK_NOT_FOUND), msg what the caller is told.
func WriteRESTError(w http.ResponseWriter, status int, grpcStatus, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": status, "status": grpcStatus, "message": msg,
		"details": []any{map[string]any{
			"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "a2a-protocol.org",
		}},
	}})
}

// bufferedBody is a request body read whole by limitBody.
type bufferedBody struct {
	*bytes.Reader
	data []byte
}

func (bufferedBody) Close() error { return nil }

// release drops the body's bytes once the answer starts: it was decoded by
// then, and a stream may last as long as its task.
func (b *bufferedBody) release() {
	b.data = nil
	b.Reset(nil)
}

// bodyBudget bounds the bytes of request bodies held at once, across all
// requests. It only ever tries: a request that finds no room is refused at
// once (503, Retry-After) rather than queued, so waiting callers cannot
// pile up behind slow bodies.
type bodyBudget struct {
	mu   sync.Mutex
	free int64
}

func newBodyBudget(n int64) *bodyBudget { return &bodyBudget{free: n} }

// take reserves n bytes; false when they are not free.
func (b *bodyBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.free {
		return false
	}
	b.free -= n
	return true
}

// give returns n bytes taken before.
func (b *bodyBudget) give(n int64) {
	b.mu.Lock()
	b.free += n
	b.mu.Unlock()
}

// bodyLimits are the bounds limitBody applies to each request body.
type bodyLimits struct {
	max     int64         // one body's size
	timeout time.Duration // reading one body, from the end of its headers
	budget  *bodyBudget   // all bodies held at once
}

// RefusalDrain is how long a refused request's unread body may still be
// read (and discarded, at most net/http's 256 KiB) before its HTTP/1
// connection closes, so that the refusal reaches the client.
const RefusalDrain = time.Second

// limitBody reads the request body whole, within the limits: a body larger
// than max is answered 413 without being read; one that finds no room in
// the budget 503 with Retry-After; one that does not arrive within the
// timeout 408. Each of these closes the connection (HTTP/1) after the
// answer, since the rest of the body is never read. The budget holds the
// body's bytes until the answer starts (or the handler returns). The read
// deadline is the request's own, counted from the end of its headers, and
// lifted once the body is read.
func limitBody(lim bodyLimits, jsonrpc bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		refuse := func(status int, grpcStatus, reason, msg string) {
			// What is left of the body is waited for at most RefusalDrain:
			// net/http would otherwise read it at the client's pace before
			// closing, and closing at once with it unread resets the
			// connection, which can destroy the answer before the client
			// reads it (seen under load with a chunked body over the limit).
			closeUnread(w, r)
			if jsonrpc {
				code := -32600 // the request is refused as sent
				if status == http.StatusServiceUnavailable {
					code = -32000 // a server error, gone when the load is
				}
				writeJSONRPCError(w, status, nil, code, msg)
			} else {
				WriteRESTError(w, status, grpcStatus, reason, msg)
			}
		}
		tooLarge := func() {
			refuse(http.StatusRequestEntityTooLarge, "INVALID_ARGUMENT", "INVALID_REQUEST",
				fmt.Sprintf("request body exceeds the limit of %d bytes", lim.max))
		}
		if r.ContentLength > lim.max {
			tooLarge()
			return
		}
		held := lim.max // a body of unknown length may be as large as the limit
		if r.ContentLength >= 0 {
			held = r.ContentLength
		}
		if !lim.budget.take(held) {
			w.Header().Set("Retry-After", "1")
			refuse(http.StatusServiceUnavailable, "UNAVAILABLE", "BUSY",
				"the agent is reading as many request bodies as it holds at once; try again shortly")
			return
		}
		// The budget is given back once: when the answer starts (the body
		// is decoded by then, its bytes are dropped, and a stream may last
		// as long as its task), or when the handler returns without one.
		var giveOnce sync.Once
		give := func() { giveOnce.Do(func() { lim.budget.give(held) }) }
		defer give()
		_ = rc.SetReadDeadline(time.Now().Add(lim.timeout)) // ErrNotSupported only for a writer that cannot: nothing to bound then
		data, err := readBody(r.Body, r.ContentLength, lim.max)
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			tooLarge()
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			refuse(http.StatusRequestTimeout, "DEADLINE_EXCEEDED", "REQUEST_TIMEOUT",
				fmt.Sprintf("the request body did not arrive within %s", lim.timeout))
			return
		case err != nil:
			refuse(http.StatusBadRequest, "INVALID_ARGUMENT", "INVALID_REQUEST", "reading the request body failed")
			return
		}
		_ = rc.SetReadDeadline(time.Time{})      // the body is read: a stream may now last as long as its task
		lim.budget.give(held - int64(len(data))) // keep only what the body holds
		held = int64(len(data))
		buffered := &bufferedBody{Reader: bytes.NewReader(data), data: data}
		r.Body = buffered
		next.ServeHTTP(&onFirstWrite{ResponseWriter: w, first: func() { buffered.release(); give() }}, r)
	})
}

// onFirstWrite calls first once, before the first WriteHeader, Write or
// Flush passes on.
type onFirstWrite struct {
	http.ResponseWriter
	first func()
	done  bool
}

func (o *onFirstWrite) start() {
	if !o.done {
		o.done = true
		o.first()
	}
}

func (o *onFirstWrite) WriteHeader(code int) { o.start(); o.ResponseWriter.WriteHeader(code) }

func (o *onFirstWrite) Write(p []byte) (int, error) { o.start(); return o.ResponseWriter.Write(p) }

func (o *onFirstWrite) Flush() { o.start(); _ = http.NewResponseController(o.ResponseWriter).Flush() }

func (o *onFirstWrite) FlushError() error {
	o.start()
	return http.NewResponseController(o.ResponseWriter).Flush()
}

func (o *onFirstWrite) Unwrap() http.ResponseWriter { return o.ResponseWriter }

// closeUnread is for an answer written while the request's body is unread:
// on HTTP/1 the connection closes after it, and what is left of the body is
// waited for (and discarded) at most RefusalDrain, where net/http would
// read up to 256 KiB of it at the client's pace, under the connection's
// ReadTimeout, before writing the answer. On HTTP/2 nothing is needed (the
// server resets the stream) and Connection: close would end the connection
// every other stream on it shares (Go's server sends GOAWAY).
func closeUnread(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 1 {
		return
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(RefusalDrain))
}

// guardResponses is the agent's outermost handler. Every response write
// and flush must make progress within stall: a client that stops reading
// (a tiny receive window, an HTTP/2 flow-control window of 0) holds its
// connection or stream at most that long, while a stream that is read
// lasts as long as its task (a deadline for the whole response would cut
// quiet SSE streams). And an HTTP/1 answer written while the request's
// body is unread, on any route, closes its connection (see closeUnread).
func guardResponses(stall time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := &guardedWriter{ResponseWriter: w, rc: http.NewResponseController(w), stall: stall, r: r}
		if r.ProtoMajor == 1 && r.Body != nil && r.Body != http.NoBody {
			g.body = &eofBody{ReadCloser: r.Body}
			r = r.WithContext(r.Context()) // a copy: net/http looks at its own request's body after the handler
			r.Body = g.body
			g.r = r
		}
		next.ServeHTTP(g, r)
		g.check()
		g.arm() // what net/http writes after the handler returns, and the final flush
		_ = g.rc.Flush()
	})
}

// eofBody is a request body that records whether it was read to its end.
type eofBody struct {
	io.ReadCloser
	eof bool
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// guardedWriter is the ResponseWriter guardResponses hands on.
type guardedWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	stall   time.Duration
	r       *http.Request
	body    *eofBody // nil: no body, or not HTTP/1
	checked bool
}

// check, before the answer starts, closes the connection after it when
// the body is unread.
func (g *guardedWriter) check() {
	if g.checked {
		return
	}
	g.checked = true
	if g.body != nil && !g.body.eof {
		closeUnread(g.ResponseWriter, g.r)
	}
}

func (g *guardedWriter) arm()    { _ = g.rc.SetWriteDeadline(time.Now().Add(g.stall)) }
func (g *guardedWriter) disarm() { _ = g.rc.SetWriteDeadline(time.Time{}) }

func (g *guardedWriter) WriteHeader(code int) {
	g.check()
	g.arm() // a 1xx is written at once
	defer g.disarm()
	g.ResponseWriter.WriteHeader(code)
}

func (g *guardedWriter) Write(p []byte) (int, error) {
	g.check()
	g.arm()
	defer g.disarm()
	return g.ResponseWriter.Write(p)
}

func (g *guardedWriter) Flush() { _ = g.FlushError() }

func (g *guardedWriter) FlushError() error {
	g.check()
	g.arm()
	defer g.disarm()
	return g.rc.Flush()
}

func (g *guardedWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// readBody reads a body of the given length (-1: unknown) up to limit bytes,
// in one allocation of the right size when the length is known.
func readBody(body io.Reader, length, limit int64) ([]byte, error) {
	if length >= 0 {
		data := make([]byte, length)
		if _, err := io.ReadFull(body, data); err != nil {
			return nil, err
		}
		// Reading on to the end lets net/http watch the connection again,
		// so a client that leaves cancels the request's context.
		if n, err := body.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read past the body's length: %d bytes, %w", n, err)
		}
		return data, nil
	}
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err == nil && int64(len(data)) > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	return data, err
}

// sseErrorAsHTTP makes a REST stream that fails before its first event
// answer with a plain HTTP error instead: a2a-go's REST handler opens the
// stream first and sends the error as a data event, which clients such as
// the JS SDK do not read as an error.
func sseErrorAsHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, ":stream") && !strings.HasSuffix(r.URL.Path, ":subscribe") {
			next.ServeHTTP(w, r)
			return
		}
		dw := &deferredSSE{w: w, status: http.StatusOK}
		next.ServeHTTP(dw, r)
		dw.flushHeld()
	})
}

// deferredSSE holds a response until its first complete SSE data event, to
// turn a first event that is an error into an HTTP error response.
type deferredSSE struct {
	w       http.ResponseWriter
	status  int
	held    bytes.Buffer
	decided bool
}

func (d *deferredSSE) Header() http.Header { return d.w.Header() }

func (d *deferredSSE) WriteHeader(status int) {
	if d.decided {
		d.w.WriteHeader(status)
		return
	}
	d.status = status
}

func (d *deferredSSE) Write(p []byte) (int, error) {
	if d.decided {
		return d.w.Write(p)
	}
	return d.held.Write(p)
}

// Flush is called by the SSE writer after each event: the moment to decide.
func (d *deferredSSE) Flush() {
	if !d.decided {
		data, complete := firstSSEData(d.held.Bytes())
		if !complete {
			return
		}
		d.decide(data)
	}
	if f, ok := d.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (d *deferredSSE) flushHeld() {
	if d.decided {
		return
	}
	data, _ := firstSSEData(d.held.Bytes())
	d.decide(data)
}

func (d *deferredSSE) decide(data []byte) {
	d.decided = true
	var env struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if d.status == http.StatusOK && data != nil && json.Unmarshal(data, &env) == nil && env.Error != nil && env.Error.Code >= 400 && env.Error.Code < 600 {
		h := d.w.Header()
		for _, k := range []string{"Cache-Control", "Connection", "X-Accel-Buffering"} {
			h.Del(k)
		}
		h.Set("Content-Type", "application/json")
		d.w.WriteHeader(env.Error.Code)
		_, _ = d.w.Write(data)
		return
	}
	d.w.WriteHeader(d.status)
	_, _ = d.w.Write(d.held.Bytes())
}

// firstSSEData returns the data of the first event in b, and whether that
// event is complete (ended by a blank line).
func firstSSEData(b []byte) ([]byte, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), len(b)+1)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 && data != nil {
			return data, true
		}
		if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			data = append(data, bytes.TrimSpace(rest)...)
		}
	}
	return data, false
}

// statusRecorder keeps the status for the request log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// logRequests logs each request once, at debug level: method, path, status,
// duration. Headers and bodies are never logged: they carry credentials. It
// also hands the agent's logger to a2a-go's transports, which log their own
// failures through the request's context.
func logRequests(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(a2alog.AttachLogger(r.Context(), log))
		if !log.Enabled(r.Context(), slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		log.LogAttrs(r.Context(), slog.LevelDebug, "request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", rec.status), slog.Duration("duration", time.Since(start)))
	})
}

// answered is the engine as a2a-go's JSON-RPC handler sees it once
// streamJSONRPC has called the engine and left the answer to a2a-go, so that
// a2a-go writes it in its own format: a GetTask's task the store's writers
// refused or its error, a SendMessage's error, a stream's first error (none:
// a stream that ended without an event). a2a-go decodes the same body again
// and so calls the same method; any other goes to the engine.
type answered struct {
	a2asrv.RequestHandler
	task *a2a.Task
	err  error
}

func (a answered) GetTask(context.Context, *a2a.GetTaskRequest) (*a2a.Task, error) {
	return a.task, a.err
}

func (a answered) SendMessage(context.Context, *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	return nil, a.err
}

func (a answered) SendStreamingMessage(context.Context, *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return a.stream()
}

func (a answered) SubscribeToTask(context.Context, *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return a.stream()
}

// stream is a stream that answered a.err before any event, or nothing.
func (a answered) stream() iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if a.err != nil {
			yield(nil, a.err)
		}
	}
}

// flushingStreamer is a handler whose streams flush a buffering transport
// before each wait for more events, as the engine's
// SendStreamingMessageWithFlush does; streamJSONRPC streams through it when
// its handler is one.
type flushingStreamer interface {
	SendStreamingMessageWithFlush(ctx context.Context, req *a2a.SendMessageRequest, flush func()) iter.Seq2[a2a.Event, error]
}

// streamJSONRPC serves SendMessage, SendStreamingMessage, SubscribeToTask
// and GetTask of JSON-RPC 1.0 and passes every other request to next,
// a2a-go's JSON-RPC handler. A SendMessage or GetTask answer is written with
// the store's JSON writers instead of encoding/json. a2a-go runs each stream
// in a goroutine of its own that hands over every event, encoded by
// encoding/json, through a channel; here the request's goroutine writes each
// event as the engine yields it, in the JSON the store's writers make, made
// once for all the streams that carry the same event (sharedEvents): one
// goroutine and one encoding less per stream and event, what a fan-out to
// many subscribers costs. A
// request it does not take apart the way a2a-go does, and a stream whose
// first answer is an error (and every SendMessage and GetTask error), go to
// a2a-go's JSON-RPC handler, so their answers are a2a-go's: next takes the
// requests this one does not, and an answer already computed is written by
// a2a-go's handler around [answered].
func streamJSONRPC(h a2asrv.RequestHandler) http.Handler {
	next := a2asrv.NewJSONRPCHandler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := r.Body.(*bufferedBody)
		flusher, canFlush := w.(http.Flusher)
		if !ok || !canFlush || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		var (
			env rpcEnvelope
			p   rpcParams
		)
		if !decodeRPC(body.data, &env, &p) {
			next.ServeHTTP(w, r)
			return
		}
		ctx, _ := a2asrv.NewCallContext(r.Context(), a2asrv.NewServiceParams(r.Header))
		id, _ := json.Marshal(env.ID) // a string or a number
		bp := answerBufs.Get().(*[]byte)
		defer func() {
			if bp != nil {
				answerBufs.Put(bp)
			}
		}()
		keep := func(buf []byte) { keepAnswer(bp, buf) }
		if env.Method == "GetTask" {
			t, err := h.GetTask(ctx, &p.get)
			var buf []byte
			if err == nil {
				buf = append(append((*bp)[:0], `{"jsonrpc":"2.0","id":`...), id...)
				if buf, err = a2ajson.AppendTask(append(buf, `,"result":`...), t); err != nil {
					buf, err = nil, nil // a2a-go's encoding/json answers t, or says why it cannot
				}
			}
			if buf == nil {
				body.Reset(body.data)
				a2asrv.NewJSONRPCHandler(answered{h, t, err}).ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			buf = append(buf, "}\n"...)
			_, _ = w.Write(buf) // a client that left has nothing to be told
			keep(buf)
			return
		}
		if env.Method == "SendMessage" {
			res, err := h.SendMessage(ctx, &p.send)
			if err != nil {
				body.Reset(body.data)
				a2asrv.NewJSONRPCHandler(answered{h, nil, err}).ServeHTTP(w, r)
				return
			}
			buf := append(append((*bp)[:0], `{"jsonrpc":"2.0","id":`...), id...)
			buf = appendStreamAnswer(append(buf, ','), res, nil, false)
			w.Header().Set("Content-Type", "application/json")
			buf = append(buf, "}\n"...)
			_, _ = w.Write(buf) // a client that left has nothing to be told
			keep(buf)
			return
		}
		// A stream takes a buffer for each event and gives it back once the
		// event is written: an idle stream holds none while it waits.
		answerBufs.Put(bp)
		bp = nil
		var (
			started  bool
			firstErr error
		)
		// Events are flushed when the engine is about to wait for more,
		// and the last goes out with the end of the response: the events of
		// one write leave in one network write. A subscription's stream has
		// no such hook: each of its events is flushed as it is written.
		var events iter.Seq2[a2a.Event, error]
		flushEach := false
		if fs, ok := h.(flushingStreamer); ok && env.Method == "SendStreamingMessage" {
			events = fs.SendStreamingMessageWithFlush(ctx, &p.send, func() {
				if started {
					flusher.Flush()
				}
			})
		} else if env.Method == "SendStreamingMessage" {
			events = h.SendStreamingMessage(ctx, &p.send)
		} else {
			events, flushEach = h.SubscribeToTask(ctx, &p.sub), true
		}
		for ev, err := range events {
			if !started {
				if err != nil {
					firstErr = err
					break
				}
				started = true
				hdr := w.Header()
				hdr.Set("Content-Type", "text/event-stream")
				hdr.Set("Cache-Control", "no-cache")
				hdr.Set("Connection", "keep-alive")
				hdr.Set("X-Accel-Buffering", "no")
				w.WriteHeader(http.StatusOK)
			}
			eb := answerBufs.Get().(*[]byte)
			buf := append(append((*eb)[:0], "id: "...), uuid.NewString()...)
			buf = append(append(append(buf, "\ndata: {\"jsonrpc\":\"2.0\",\"id\":"...), id...), ',')
			buf = appendStreamAnswer(buf, ev, err, true)
			buf = append(buf, "}\n\n"...)
			_, werr := w.Write(buf)
			keepAnswer(eb, buf)
			answerBufs.Put(eb)
			if werr != nil {
				return // the client left; leaving the loop ends the stream
			}
			if flushEach {
				flusher.Flush()
			}
			if err != nil {
				return
			}
		}
		if started {
			return
		}
		body.Reset(body.data)
		a2asrv.NewJSONRPCHandler(answered{h, nil, firstErr}).ServeHTTP(w, r)
	})
}

// answerBufs holds the buffers the fast path writes answers in: a fresh
// 2 KiB one per request was the transport's largest allocation.
var answerBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxKeptAnswer bounds the buffers answerBufs keeps.
const maxKeptAnswer = 64 << 10

// keepAnswer keeps buf, the answer written from bp's buffer, in bp for the
// next answer, unless outsized.
func keepAnswer(bp *[]byte, buf []byte) {
	if cap(buf) <= maxKeptAnswer {
		*bp = buf[:0]
	}
}

// rpcEnvelope is a JSON-RPC request as streamJSONRPC reads it.
type rpcEnvelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      any             `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// rpcParams are the params of the requests streamJSONRPC serves, one
// field for each kind.
type rpcParams struct {
	send a2a.SendMessageRequest
	get  a2a.GetTaskRequest
	sub  a2a.SubscribeToTaskRequest
}

// decodeRPC decodes a request streamJSONRPC serves, with encoding/json,
// into the field of p for its method. False: the request is left to
// a2a-go's handler.
//
// A hand-written one-pass decoder of the commonest SendMessage (a message
// of text parts) stood here, and was removed: measured with four interleaved
// pairs of `handoff bench --scenarios send --concurrency 64 --duration 8s`,
// with it the blocking sends reached 0.289–0.303× the limit (mean 0.299) and
// 4.91–5.17× the bare SDK, without it 0.290–0.341× (mean 0.311) and
// 4.29–5.04×, at 157 against 184 allocations a request: no end-to-end gain
// beyond the noise.
func decodeRPC(data []byte, env *rpcEnvelope, p *rpcParams) bool {
	if json.Unmarshal(data, env) != nil || env.JSONRPC != "2.0" || !plainID(env.ID) {
		return false
	}
	switch env.Method {
	case "SendMessage", "SendStreamingMessage":
		return json.Unmarshal(env.Params, &p.send) == nil
	case "GetTask":
		return json.Unmarshal(env.Params, &p.get) == nil
	case "SubscribeToTask":
		return json.Unmarshal(env.Params, &p.sub) == nil
	}
	return false
}

// plainID reports whether a JSON-RPC id is one a2a-go's handler takes and
// answers with the same JSON: a string or a number.
func plainID(id any) bool {
	switch id.(type) {
	case string, float64:
		return true
	}
	return false
}

// appendStreamAnswer appends `"result":` and the event, or `"error":` and
// err, the way a2a-go's JSON-RPC binding writes them; shared: the event's
// JSON from sharedEvents, for an event other streams may carry too.
func appendStreamAnswer(b []byte, ev a2a.Event, err error, shared bool) []byte {
	if err == nil {
		b = append(b, `"result":`...)
		appendEvent := a2ajson.AppendStreamResponse
		if shared {
			appendEvent = sharedEvents.appendEvent
		}
		if out, eerr := appendEvent(b, ev); eerr == nil {
			return out
		}
		j, merr := json.Marshal(a2a.StreamResponse{Event: ev})
		if merr == nil {
			return append(b, j...)
		}
		b, err = b[:len(b)-len(`"result":`)], fmt.Errorf("%w: encode event: %w", a2a.ErrInternalError, merr)
	}
	code := jsonrpcCode(err)
	j, _ := json.Marshal(map[string]any{"code": code, "message": err.Error(), "data": jsonrpcErrorData(code)}) // only strings and an int
	return append(append(b, `"error":`...), j...)
}

// jsonrpcErrors are the JSON-RPC error codes of the A2A specification.
var jsonrpcErrors = []struct {
	code int
	err  error
}{
	{-32700, a2a.ErrParseError}, {-32600, a2a.ErrInvalidRequest}, {-32601, a2a.ErrMethodNotFound},
	{-32602, a2a.ErrInvalidParams}, {-32000, a2a.ErrServerError}, {-32001, a2a.ErrTaskNotFound},
	{-32002, a2a.ErrTaskNotCancelable}, {-32003, a2a.ErrPushNotificationNotSupported},
	{-32004, a2a.ErrUnsupportedOperation}, {-32005, a2a.ErrUnsupportedContentType},
	{-32006, a2a.ErrInvalidAgentResponse}, {-32007, a2a.ErrExtendedCardNotConfigured},
	{-32008, a2a.ErrExtensionSupportRequired}, {-32009, a2a.ErrVersionNotSupported},
	{-31401, a2a.ErrUnauthenticated}, {-31403, a2a.ErrUnauthorized},
	{-32603, a2a.ErrInternalError},
}

// jsonrpcCode is the JSON-RPC error code of the A2A specification for err.
func jsonrpcCode(err error) int {
	for _, c := range jsonrpcErrors {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return -32603
}

// jsonrpcErrorData is the data member of a JSON-RPC error with code: the
// google.rpc.ErrorInfo naming its A2A reason, as a2a-go's handler writes it
// (A2A 1.0, 9.5).
func jsonrpcErrorData(code int) []any {
	reason := a2a.ErrorReason(a2a.ErrInternalError)
	for _, c := range jsonrpcErrors {
		if c.code == code {
			reason = a2a.ErrorReason(c.err)
			break
		}
	}
	return []any{map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": a2a.ProtocolDomain}}
}
