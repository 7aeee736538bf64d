package model_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/internal/model"
)

// httpCaller runs each call as a POST of its arguments to a tool server, as the pipeline's
// MCP call would cross a socket.
type httpCaller struct {
	url string
	hc  *http.Client
}

func (c httpCaller) Call(ctx context.Context, call model.Call) (model.Observation, error) {
	out, err := postTool(ctx, c.hc, c.url, call.Arguments)
	if err != nil {
		return model.Observation{}, err
	}
	return model.Observation{Status: model.ObservationSuccess, Output: out}, nil
}

func postTool(ctx context.Context, hc *http.Client, url string, args []byte) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(args))
	if err != nil {
		return nil, err
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	return io.ReadAll(res.Body)
}

// recording keeps the first two requests the loop sends, to replay them bare.
type recording struct {
	model.Completer
	mu   sync.Mutex
	reqs []model.Request
}

func (r *recording) Complete(ctx context.Context, req model.Request) (model.Reply, error) {
	r.mu.Lock()
	if len(r.reqs) < 2 {
		r.reqs = append(r.reqs, req)
	}
	r.mu.Unlock()
	return r.Completer.Complete(ctx, req)
}

// BenchmarkTurn measures a whole task of one tool-calling turn and a final answer (Start,
// two model round trips, one tool call, five saves) against the same two model requests and
// the same tool call made bare, in the same iterations. overhead-ratio is loop / (model +
// tool); the target is at most 1.2.
func BenchmarkTurn(b *testing.B) {
	client, _ := startModel(b, addThenSay)
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	b.Cleanup(tool.Close)
	tc := httpCaller{tool.URL, tool.Client()}
	rec := &recording{Completer: client}
	cfg := model.SkillConfig{Instructions: "You keep the team's notes.", Tools: []string{"notes__*"}}
	ml, err := model.NewLoop(rec, cfg)
	if err != nil {
		b.Fatal(err)
	}
	l := bound{ml, model.Env{Catalog: catalog{"v1", notesTools}, Caller: tc, Saver: &saver{}}}
	ctx := b.Context()
	task := func() {
		conv, err := l.Start(ctx, "buy milk")
		if err != nil {
			b.Fatal(err)
		}
		if out, err := l.Run(ctx, conv, nil); err != nil || out.Status != model.StatusCompleted {
			b.Fatalf("Run: %+v, %v", out, err)
		}
	}
	task() // records the two requests and the tool call's arguments to replay bare
	reqs := rec.reqs
	args := []byte(`{"count":3,"text":"buy milk"}`)
	var loopT, modelT, toolT time.Duration
	for b.Loop() {
		t0 := time.Now()
		task()
		t1 := time.Now()
		for _, r := range reqs {
			if _, err := client.Complete(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
		t2 := time.Now()
		if _, err := postTool(ctx, tc.hc, tc.url, args); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		loopT, modelT, toolT = loopT+t1.Sub(t0), modelT+t2.Sub(t1), toolT+t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(loopT.Nanoseconds())/n, "loop-ns/task")
	b.ReportMetric(float64(modelT.Nanoseconds())/n, "model-ns/task")
	b.ReportMetric(float64(toolT.Nanoseconds())/n, "tool-ns/task")
	b.ReportMetric(float64(loopT)/float64(modelT+toolT), "overhead-ratio")
}
