package artifacts

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// An Assembler puts a task's artifact chunks back together. Feed it the
// task's [a2a.TaskArtifactUpdateEvent]s in the order they arrived.
//
// An Assembler is not safe for concurrent use: it belongs to one task's
// event stream, which is read in order by one goroutine.
type Assembler struct {
	max int64
	// held counts the content of every unfinished artifact, so the limit
	// bounds the memory one peer's stream can make us hold, however it
	// spreads its bytes over artifact ids.
	held    int64
	pending map[a2a.ArtifactID]*chunks
	order   []a2a.ArtifactID // first-seen order, so Pending is deterministic
}

type chunks struct {
	art  *a2a.Artifact
	size int64
}

// NewAssembler returns an empty Assembler. [WithMaxBytes] bounds the content
// it holds unfinished, 16 MiB by default.
func NewAssembler(opts ...Option) *Assembler {
	c := newConfig(opts)
	return &Assembler{max: c.maxBytes, pending: make(map[a2a.ArtifactID]*chunks)}
}

// Add takes the next chunk. Append=false starts the artifact, or replaces
// what was held under its id; Append=true adds its parts (and its metadata
// keys, later chunks winning) to the held artifact. When LastChunk is set,
// Add returns the whole artifact and forgets it.
//
// Add refuses an append to an artifact it does not hold with
// [ErrUnknownArtifact], and a chunk that takes the content held over the
// limit with [ErrTooLarge]; the artifact that chunk belongs to is then
// dropped, so later appends to it fail too. Content is counted as text
// bytes, raw bytes, URL bytes and the JSON encoding of data. A malformed
// chunk is refused with [ErrInvalidArtifact]. Add keeps no reference to the
// event's artifact or its parts slice.
func (as *Assembler) Add(ev *a2a.TaskArtifactUpdateEvent) (done *a2a.Artifact, err error) {
	if ev == nil || ev.Artifact == nil || ev.Artifact.ID == "" {
		return nil, fmt.Errorf("add artifact chunk: %w: no artifact id", ErrInvalidArtifact)
	}
	id := ev.Artifact.ID
	size, err := partsSize(ev.Artifact.Parts)
	if err != nil {
		return nil, fmt.Errorf("add chunk of artifact %s: %w", id, err)
	}
	cur, ok := as.pending[id]
	if ev.Append && !ok {
		return nil, fmt.Errorf("add chunk of artifact %s: %w", id, ErrUnknownArtifact)
	}
	held := as.held + size
	if ok && !ev.Append {
		held -= cur.size // a restart replaces what was held
	}
	if held > as.max {
		if ok {
			as.forget(id)
		}
		return nil, fmt.Errorf("add chunk of artifact %s: %d bytes held, limit %d: %w", id, held, as.max, ErrTooLarge)
	}
	as.held = held

	switch {
	case !ok:
		cur = &chunks{art: clone(ev.Artifact), size: size}
		as.pending[id] = cur
		as.order = append(as.order, id)
	case !ev.Append:
		cur.art, cur.size = clone(ev.Artifact), size
	default:
		cur.art.Parts = append(cur.art.Parts, ev.Artifact.Parts...)
		if len(ev.Artifact.Metadata) > 0 {
			if cur.art.Metadata == nil {
				cur.art.Metadata = make(map[string]any, len(ev.Artifact.Metadata))
			}
			maps.Copy(cur.art.Metadata, ev.Artifact.Metadata)
		}
		cur.size += size
	}
	if !ev.LastChunk {
		return nil, nil
	}
	as.forget(id)
	return cur.art, nil
}

// Pending returns copies of the artifacts started but not finished, in the
// order they were first seen. A peer that never sets LastChunk (a2a-go's
// NewArtifactEvent does not) leaves its artifacts here: at the task's
// terminal state the caller decides whether to take them as final.
func (as *Assembler) Pending() []*a2a.Artifact {
	out := make([]*a2a.Artifact, 0, len(as.order))
	for _, id := range as.order {
		out = append(out, clone(as.pending[id].art))
	}
	return out
}

// forget drops an artifact and the bytes it held.
func (as *Assembler) forget(id a2a.ArtifactID) {
	as.held -= as.pending[id].size
	delete(as.pending, id)
	as.order = slices.DeleteFunc(as.order, func(x a2a.ArtifactID) bool { return x == id })
}

// clone copies what the Assembler changes in place (the parts slice and the
// metadata map), so neither the sender's event nor a caller's copy sees
// later chunks. Parts themselves are shared: nothing here modifies a part.
func clone(a *a2a.Artifact) *a2a.Artifact {
	c := *a
	c.Parts = slices.Clone(a.Parts)
	c.Metadata = maps.Clone(a.Metadata)
	c.Extensions = slices.Clone(a.Extensions)
	return &c
}

func partsSize(parts []*a2a.Part) (int64, error) {
	var total int64
	for i, p := range parts {
		n, err := partSize(p)
		if err != nil {
			return 0, fmt.Errorf("part %d: %w", i, err)
		}
		total += n
	}
	return total, nil
}

// partSize measures a part's content and refuses content that a2a-go would
// not decode back from its own JSON (a nil part, an empty URL, nil raw
// bytes, a nil data value, an unknown content type): such a part has no
// stable digest.
func partSize(p *a2a.Part) (int64, error) {
	if p == nil {
		return 0, fmt.Errorf("%w: nil part", ErrInvalidArtifact)
	}
	switch c := p.Content.(type) {
	case a2a.Text:
		return int64(len(c)), nil
	case a2a.Raw:
		if c == nil {
			return 0, fmt.Errorf("%w: nil raw content", ErrInvalidArtifact)
		}
		return int64(len(c)), nil
	case a2a.URL:
		if c == "" {
			return 0, fmt.Errorf("%w: empty url", ErrInvalidArtifact)
		}
		return int64(len(c)), nil
	case a2a.Data:
		if c.Value == nil {
			return 0, fmt.Errorf("%w: data part without a value", ErrInvalidArtifact)
		}
		b, err := json.Marshal(c.Value)
		if err != nil {
			return 0, fmt.Errorf("%w: data part: %v", ErrInvalidArtifact, err)
		}
		return int64(len(b)), nil
	default:
		return 0, fmt.Errorf("%w: content of type %T", ErrInvalidArtifact, p.Content)
	}
}
