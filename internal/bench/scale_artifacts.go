package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff"
)

// artifactChunk is the size of each chunk the artifact curve's peer
// streams: one raw part of the artifact each.
const artifactChunk = 1 << 20

// artifactContract holds the peer to its manifest: the bytes it says it
// streamed. The streamed artifact itself is checked by the delegation (its
// digest in the stream and the final task must agree).
const artifactContract = `skill: fetch-blob
version: "1"
artifacts:
  manifest:
    type: object
    required: [bytes]
    properties:
      bytes: {type: integer, minimum: 1}
commit_requires:
  - {artifact: manifest, pointer: /bytes}
`

// chunkPeer is the artifact curve's peer executor: asked for N bytes (the
// message's text), it streams them as chunks of one artifact, then a
// manifest naming N.
type chunkPeer struct{}

// Execute implements a2asrv.AgentExecutor.
func (chunkPeer) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		var text string
		for _, p := range ec.Message.Parts {
			if t, ok := p.Content.(a2a.Text); ok {
				text = string(t)
			}
		}
		n, err := strconv.Atoi(strings.TrimSpace(text))
		if err != nil || n < 1 {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("want a number of bytes"))), nil)
			return
		}
		for off := 0; off < n; off += artifactChunk {
			chunk := bytes.Repeat([]byte{byte('a' + off/artifactChunk%26)}, min(artifactChunk, n-off))
			ev := a2a.NewArtifactUpdateEvent(ec, "blob", a2a.NewRawPart(chunk))
			ev.Artifact.Name = "blob"
			ev.Append = off > 0
			ev.LastChunk = off+artifactChunk >= n
			if !yield(ev, nil) {
				return
			}
		}
		manifest := a2a.NewArtifactUpdateEvent(ec, "manifest", a2a.NewDataPart(map[string]any{"bytes": n}))
		manifest.Artifact.Name, manifest.Append, manifest.LastChunk = "manifest", false, true
		if !yield(manifest, nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

// Cancel implements a2asrv.AgentExecutor.
func (chunkPeer) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// runArtifacts serves a peer streaming an artifact of each size in chunks
// and a front agent delegating to it, and measures at each size the send
// straight to the peer, the delegated send, and copying the same bytes to
// a file on the same disk: time and the process's peak RSS above idle.
func runArtifacts(ctx context.Context, opts ScaleOptions, dir string, cr *CurveReport) (err error) {
	dir = filepath.Join(dir, "artifacts")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("make the artifact curve's directory: %w", err)
	}
	contract := filepath.Join(dir, "contract.yaml")
	if err := os.WriteFile(contract, []byte(artifactContract), 0o600); err != nil {
		return fmt.Errorf("write the artifact contract: %w", err)
	}
	peerYAML := "name: Bench blob peer\ndescription: Streams as many bytes as asked.\nauth: {anonymous: true}\nlog: {level: warn}\n" +
		"skills: [{id: blob, name: Blob, executor: go}]\n"
	frontYAML := "name: Bench blob front\ndescription: Fetches blobs from its peer.\nauth: {anonymous: true}\nlog: {level: warn}\n" +
		"peers: [{name: peer, url: %q, trust: {jku_prefixes: [%q]}}]\n" +
		fmt.Sprintf("skills: [{id: fetch-blob, name: Fetch a blob, description: The peer streams it., executor: delegate, delegate: {skill: blob, contract: %q, timeout: 10m}}]\n", contract)
	log := slog.New(slog.NewTextHandler(opts.Progress, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pair, err := startPair(ctx, dir, peerYAML, frontYAML, log, handoff.WithExecutor("blob", chunkPeer{}))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, pair.close()) }()
	g := newGenerator(1)
	defer g.close()
	for _, n := range opts.Sizes[CurveArtifact] {
		started := time.Now()
		pctx, cancel := context.WithTimeout(ctx, opts.PointTimeout)
		p := Point{Size: n}
		err := artifactPoint(pctx, g, pair, dir, n, &p)
		ended := endPoint(ctx, pctx, opts, cr, p, started, err)
		cancel()
		if ended {
			return nil
		}
	}
	return nil
}

func artifactPoint(ctx context.Context, g *generator, pair *delegationPair, dir string, n int, p *Point) error {
	text := strconv.Itoa(n)
	for _, run := range []struct {
		name string
		f    func() error
	}{
		{"copy", func() error { return copyToFile(ctx, filepath.Join(dir, "copy"), n) }},
		{"direct", func() error { return sendDiscarding(ctx, g, pair.peer, "blob", text) }},
		{"delegated", func() error { return sendDiscarding(ctx, g, pair.front, "fetch-blob", text) }},
	} {
		took, peak, err := peakRSSAbove(run.f)
		if err != nil {
			if ctx.Err() != nil {
				return errPointTimeout
			}
			return fmt.Errorf("%s: %w", run.name, err)
		}
		p.set(run.name+"_mib_per_s", float64(n)/(1<<20)/took.Seconds())
		p.set(run.name+"_peak_rss_above_idle_mib", float64(peak)/(1<<20))
		if run.name == "copy" {
			p.set("copy_s", took.Seconds())
		} else {
			p.set(run.name+"_s", took.Seconds())
		}
	}
	p.set("delegated_vs_copy", p.Metrics["delegated_s"]/p.Metrics["copy_s"])
	return nil
}

// copyToFile writes n bytes to path in chunks of the peer's size and
// syncs it, as the artifact store writes a blob: the disk's own pace.
func copyToFile(ctx context.Context, path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("copy to a file: %w", err)
	}
	defer os.Remove(path)
	for off := 0; off < n; off += artifactChunk {
		if ctx.Err() != nil {
			f.Close()
			return ctx.Err()
		}
		if _, err := f.Write(bytes.Repeat([]byte{byte('a' + off/artifactChunk%26)}, min(artifactChunk, n-off))); err != nil {
			f.Close()
			return fmt.Errorf("copy to a file: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("copy to a file: %w", err)
	}
	return f.Close()
}

// sendDiscarding sends a blocking message with text to skill and reads
// the answer without keeping it (the peer's answer holds the whole
// artifact): only its head is kept, to check it is a completed task.
func sendDiscarding(ctx context.Context, g *generator, base, skill, text string) error {
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"bench-%d","role":"ROLE_USER","metadata":{"handoff/skill":%q},"parts":[{"text":%q}]}}}`,
		g.seq.Add(1), skill, text)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+jsonrpcPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	res, err := g.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	head := make([]byte, 8<<10)
	k, _ := io.ReadFull(res.Body, head)
	head = head[:k]
	tail := &tailWriter{max: 8 << 10}
	if _, err := io.Copy(tail, res.Body); err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %.300s", res.StatusCode, head)
	}
	// The task's status comes before or after its artifacts: look at both
	// ends for the task's own state (a delegation's record names the
	// peer's state too, as remoteState).
	if bytes.Contains(head, errorMember) || !bytes.Contains(head, taskCompleted) && !bytes.Contains(tail.b, taskCompleted) {
		// The end holds the task's status: its message says why.
		end := tail.b
		if len(end) == 0 {
			end = head
		}
		return fmt.Errorf("answer is not a completed task: … %s", end[max(len(end)-600, 0):])
	}
	return nil
}

var taskCompleted = []byte(`"state":"TASK_STATE_COMPLETED"`)

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	max int
	b   []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	if over := len(w.b) - w.max; over > 0 {
		w.b = append(w.b[:0], w.b[over:]...)
	}
	return len(p), nil
}

// peakRSSAbove runs f and returns how long it took and the process's peak
// resident memory during it above what it held just before (after giving
// the heap's free pages back, so one run's garbage is not the next one's
// idle).
func peakRSSAbove(f func() error) (time.Duration, int64, error) {
	debug.FreeOSMemory()
	idle := residentBytes()
	var (
		peak int64 // the sampler's until wg.Wait returns
		wg   sync.WaitGroup
	)
	done := make(chan struct{})
	wg.Go(func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, residentBytes())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	t0 := time.Now()
	err := f()
	took := time.Since(t0)
	close(done)
	wg.Wait()
	peak = max(peak, residentBytes())
	return took, max(peak-idle, 0), err
}
