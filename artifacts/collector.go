package artifacts

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// A Collector follows one peer task's event stream: it writes and hashes
// each artifact's canonical JSON chunk by chunk as the chunks arrive (in
// order, as an [Assembler] would put them together), spooling a large one
// to a temp file in a [Store], stores every finished artifact there, and
// at the end checks the peer's final task against what it saw. It never
// holds an artifact's parts: only its digest so far.
//
// The final task is what counts: it is the peer's whole record and, after
// our own restart, the only one (a resubscribed stream has the tail only).
// The stream is held to it: an artifact the Collector assembled whole must
// be in the final task with the same digest ([Collector.Check]). An
// artifact seen only in part (appends to an artifact whose start was
// missed, or one over the size limit) is left to the final task alone.
//
// A Collector is not safe for concurrent use: one goroutine reads one stream.
type Collector struct {
	store   *Store
	max     int64                     // content held unfinished, as an Assembler counts it
	held    int64                     // content of the pending spools
	pending map[a2a.ArtifactID]*spool // artifacts unfinished
	porder  []a2a.ArtifactID          // first-seen order of pending, so Finish is deterministic
	whole   map[a2a.ArtifactID]string // digest of each artifact assembled whole
	order   []a2a.ArtifactID          // first-finished order of whole, for stable errors
	seen    map[a2a.ArtifactID]bool   // ids seen only in part: the final task decides
	kept    map[*a2a.Artifact]string  // digest of each final artifact Keep stored, for Check
}

// NewCollector returns a Collector that keeps finished artifacts in store.
// The options bound the content held unfinished as for [NewAssembler].
func NewCollector(store *Store, opts ...Option) *Collector {
	return &Collector{store: store, max: newConfig(opts).maxBytes, pending: make(map[a2a.ArtifactID]*spool),
		whole: make(map[a2a.ArtifactID]string), seen: make(map[a2a.ArtifactID]bool)}
}

// Add takes the stream's next event. Artifact chunks are written and
// hashed, and a finished artifact (LastChunk) is stored. A task snapshot
// (the first event of a resubscribe) restarts each artifact it holds from
// the snapshot's copy, so the appends that follow build on it. Content the
// peer got wrong (an append to an unknown artifact, a malformed chunk,
// more than the limit) is not an error here: that artifact is left to the
// final task, which [Store.Put] checks again. Add fails only when a
// finished artifact cannot be stored.
func (c *Collector) Add(ctx context.Context, ev a2a.Event) error {
	switch e := ev.(type) {
	case *a2a.Task:
		for _, a := range e.Artifacts {
			if a == nil {
				continue
			}
			c.take(&a2a.TaskArtifactUpdateEvent{TaskID: e.ID, ContextID: e.ContextID, Artifact: a})
		}
	case *a2a.TaskArtifactUpdateEvent:
		if done := c.take(e); done != nil {
			return c.keep(ctx, e.Artifact.ID, done)
		}
	}
	return nil
}

// take writes one chunk to its artifact's spool and returns the spool it
// finished, if any. A refused chunk marks its artifact as seen in part.
// The checks and the limit are the Assembler's, so an artifact is whole
// here exactly when an Assembler would have finished it.
func (c *Collector) take(ev *a2a.TaskArtifactUpdateEvent) *spool {
	if ev == nil || ev.Artifact == nil || ev.Artifact.ID == "" {
		return nil // nothing to follow, nothing to hold the final task to
	}
	id := ev.Artifact.ID
	size, err := partsSize(ev.Artifact.Parts)
	if err != nil {
		c.partial(id) // as the Assembler, which refuses the chunk and keeps the rest
		return nil
	}
	cur, ok := c.pending[id]
	if ev.Append && !ok {
		c.partial(id)
		return nil
	}
	held := c.held + size
	if ok && !ev.Append {
		held -= cur.size // a restart replaces what was held
	}
	if held > c.max {
		c.drop(id)
		return nil
	}
	c.held = held
	switch {
	case !ok:
		cur = newSpool(c.store)
		c.pending[id] = cur
		c.porder = append(c.porder, id)
	case !ev.Append: // a restart keeps its place in the order
		cur.discard()
		cur = newSpool(c.store)
		c.pending[id] = cur
	}
	if !ev.Append { // a start (or restart) of the artifact: it is whole again
		delete(c.seen, id)
	}
	if err := cur.add(ev.Artifact.Parts, size); err != nil {
		c.partial(id) // its content is counted still, as the Assembler would hold it
	}
	if !ev.LastChunk {
		return nil
	}
	c.forget(id)
	return cur
}

// drop gives up an artifact: its spool, if any, and marks it seen in part.
func (c *Collector) drop(id a2a.ArtifactID) {
	if sp, ok := c.pending[id]; ok {
		sp.discard()
		c.forget(id)
	}
	c.partial(id)
}

// forget stops following a pending artifact, leaving its spool to the caller.
func (c *Collector) forget(id a2a.ArtifactID) {
	c.held -= c.pending[id].size
	delete(c.pending, id)
	c.porder = slices.DeleteFunc(c.porder, func(x a2a.ArtifactID) bool { return x == id })
}

// partial marks id as seen in part only: the final task decides it.
func (c *Collector) partial(id a2a.ArtifactID) {
	c.seen[id] = true
	delete(c.whole, id)
	c.order = slices.DeleteFunc(c.order, func(x a2a.ArtifactID) bool { return x == id })
}

// keep stores a finished artifact's spool and remembers its digest.
func (c *Collector) keep(ctx context.Context, id a2a.ArtifactID, sp *spool) error {
	if c.seen[id] {
		sp.discard()
		return nil
	}
	d, err := sp.finish(ctx)
	if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrInvalidArtifact) {
		c.partial(id) // the final task's copy meets the same check
		return nil
	}
	if err != nil {
		return fmt.Errorf("collect artifact %s: %w", id, err)
	}
	if _, ok := c.whole[id]; !ok {
		c.order = append(c.order, id)
	}
	c.whole[id] = d
	return nil
}

// Finish ends the stream: artifacts still unfinished are taken as whole
// (a2a-go's NewArtifactEvent never sets LastChunk, so at the peer's end
// state what was streamed is all there is) and stored.
func (c *Collector) Finish(ctx context.Context) error {
	for len(c.porder) > 0 {
		id := c.porder[0]
		sp := c.pending[id]
		c.forget(id)
		if err := c.keep(ctx, id, sp); err != nil {
			c.Close()
			return err
		}
	}
	return nil
}

// Close drops what the Collector still holds unfinished (temp files
// included): for a stream given up before [Collector.Finish].
func (c *Collector) Close() {
	for id, sp := range c.pending {
		sp.discard()
		delete(c.pending, id)
	}
	c.porder, c.held = nil, 0
}

// Keep stores the peer's final artifacts and returns the digest of each,
// in order ("" for a nil one). [Collector.Check] then holds the stream to
// these digests without hashing the artifacts again.
func (c *Collector) Keep(ctx context.Context, final []*a2a.Artifact) ([]string, error) {
	out := make([]string, len(final))
	if c.kept == nil {
		c.kept = make(map[*a2a.Artifact]string, len(final))
	}
	for i, a := range final {
		if a == nil {
			continue
		}
		d, err := c.store.Put(ctx, a)
		if err != nil {
			return nil, fmt.Errorf("keep artifact %s: %w", a.ID, err)
		}
		out[i], c.kept[a] = d, d
	}
	return out, nil
}

// Check holds the stream to the peer's final artifacts: every artifact
// assembled whole must be there, under the same id, with the same digest.
// Otherwise it returns [ErrMismatch] naming the first that is not. Final
// artifacts the stream did not show whole are not checked: after a
// restart the stream has only the tail, and the final task is all there is.
func (c *Collector) Check(final []*a2a.Artifact) error {
	byID := make(map[a2a.ArtifactID]*a2a.Artifact, len(final))
	for _, a := range final {
		if a != nil {
			byID[a.ID] = a
		}
	}
	for _, id := range c.order {
		want := c.whole[id]
		a, ok := byID[id]
		if !ok {
			return fmt.Errorf("artifact %s (streamed as %s) is not in the final task: %w", id, want, ErrMismatch)
		}
		got, ok := c.kept[a]
		if !ok {
			var err error
			if got, err = Digest(a); err != nil {
				return fmt.Errorf("artifact %s of the final task: %w", id, err)
			}
		}
		if got != want {
			return fmt.Errorf("artifact %s streamed as %s, final task has %s: %w", id, want, got, ErrMismatch)
		}
	}
	return nil
}
