package artifacts

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// A Collector follows one peer task's event stream: it assembles the
// artifact chunks as they arrive ([Assembler]), stores every finished
// artifact in a [Store], and at the end checks the peer's final task
// against what it saw.
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
	store *Store
	as    *Assembler
	whole map[a2a.ArtifactID]string // digest of each artifact assembled whole
	order []a2a.ArtifactID          // first-finished order of whole, for stable errors
	seen  map[a2a.ArtifactID]bool   // ids seen only in part: the final task decides
	kept  map[*a2a.Artifact]string  // digest of each final artifact Keep stored, for Check
}

// NewCollector returns a Collector that keeps finished artifacts in store.
// The options bound the assembly as for [NewAssembler].
func NewCollector(store *Store, opts ...Option) *Collector {
	return &Collector{store: store, as: NewAssembler(opts...),
		whole: make(map[a2a.ArtifactID]string), seen: make(map[a2a.ArtifactID]bool)}
}

// Add takes the stream's next event. Artifact chunks are assembled, and a
// finished artifact (LastChunk) is hashed and stored. A task snapshot (the
// first event of a resubscribe) restarts each artifact it holds from the
// snapshot's copy, so the appends that follow build on it. Content the
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
		done := c.take(e)
		if done != nil {
			return c.keep(ctx, done)
		}
	}
	return nil
}

// take feeds one chunk to the assembler and returns the artifact it
// finished, if any. A refused chunk marks its artifact as seen in part.
func (c *Collector) take(ev *a2a.TaskArtifactUpdateEvent) *a2a.Artifact {
	if ev == nil || ev.Artifact == nil || ev.Artifact.ID == "" {
		return nil // nothing to follow, nothing to hold the final task to
	}
	done, err := c.as.Add(ev)
	id := ev.Artifact.ID
	if err != nil {
		c.partial(id)
		return nil
	}
	if !ev.Append { // a start (or restart) of the artifact: it is whole again
		delete(c.seen, id)
	}
	return done
}

// partial marks id as seen in part only: the final task decides it.
func (c *Collector) partial(id a2a.ArtifactID) {
	c.seen[id] = true
	delete(c.whole, id)
	c.order = slices.DeleteFunc(c.order, func(x a2a.ArtifactID) bool { return x == id })
}

// keep stores a finished artifact and remembers its digest.
func (c *Collector) keep(ctx context.Context, a *a2a.Artifact) error {
	if c.seen[a.ID] {
		return nil
	}
	d, err := c.store.Put(ctx, a)
	if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrInvalidArtifact) {
		c.partial(a.ID) // the final task's copy meets the same check
		return nil
	}
	if err != nil {
		return fmt.Errorf("collect artifact %s: %w", a.ID, err)
	}
	if _, ok := c.whole[a.ID]; !ok {
		c.order = append(c.order, a.ID)
	}
	c.whole[a.ID] = d
	return nil
}

// Finish ends the stream: artifacts still unfinished are taken as whole
// (a2a-go's NewArtifactEvent never sets LastChunk, so at the peer's end
// state what was streamed is all there is) and stored.
func (c *Collector) Finish(ctx context.Context) error {
	for _, a := range c.as.Pending() {
		if err := c.keep(ctx, a); err != nil {
			return err
		}
	}
	c.as = NewAssembler(WithMaxBytes(c.as.max))
	return nil
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
