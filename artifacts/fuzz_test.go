package artifacts_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/handoff-a2a/handoff/artifacts"
)

// decodeEvents turns fuzz bytes into chunk events, three header bytes each:
// flags (bit 0 append, bit 1 lastChunk, bits 2-3 part kind, bit 4 no
// artifact), an artifact id out of four, and a content length taken from the
// bytes that follow. Few ids and a small limit make appends, replaces and
// refusals collide often.
func decodeEvents(b []byte) []*a2a.TaskArtifactUpdateEvent {
	var evs []*a2a.TaskArtifactUpdateEvent
	for len(b) >= 3 {
		flags, id, n := b[0], b[1]%4, int(b[2]%32)
		b = b[3:]
		n = min(n, len(b))
		content := b[:n]
		b = b[n:]
		ev := &a2a.TaskArtifactUpdateEvent{TaskID: "t", ContextID: "c", Append: flags&1 != 0, LastChunk: flags&2 != 0}
		if flags&16 != 0 {
			evs = append(evs, ev)
			continue
		}
		var p *a2a.Part
		switch (flags >> 2) & 3 {
		case 0:
			p = a2a.NewTextPart(string(content))
		case 1:
			p = a2a.NewRawPart(append([]byte{}, content...))
		case 2:
			p = a2a.NewDataPart(map[string]any{"v": string(content)})
		case 3:
			p = a2a.NewFileURLPart(a2a.URL(content), "")
		}
		ev.Artifact = &a2a.Artifact{ID: a2a.ArtifactID(rune('a' + id)), Parts: a2a.ContentParts{p}}
		evs = append(evs, ev)
	}
	return evs
}

func FuzzAssembler(f *testing.F) {
	// Seeds follow the unit tests: in order, replace, unknown append, too large.
	f.Add([]byte("\x00\x00\x08chunk-1 \x03\x00\x07chunk-2"))
	f.Add([]byte("\x00\x01\x05draft\x00\x01\x05final\x03\x01\x01!"))
	f.Add([]byte("\x01\x02\x03abc"))
	f.Add([]byte("\x00\x00\x1f0123456789012345678901234567890\x05\x00\x1f0123456789012345678901234567890"))
	f.Add([]byte("\x08\x00\x02ab\x0a\x03\x03xyz\x10\x00\x00\x0e\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		const limit = 48
		as := artifacts.NewAssembler(artifacts.WithMaxBytes(limit))
		for _, ev := range decodeEvents(b) {
			done, err := as.Add(ev)
			if err != nil {
				if done != nil {
					t.Fatalf("Add returned an artifact and an error: %v", err)
				}
				if !errors.Is(err, artifacts.ErrUnknownArtifact) && !errors.Is(err, artifacts.ErrTooLarge) && !errors.Is(err, artifacts.ErrInvalidArtifact) {
					t.Fatalf("Add: unexpected error %v", err)
				}
				continue
			}
			if done == nil {
				continue
			}
			if !ev.LastChunk || done.ID != ev.Artifact.ID {
				t.Fatalf("finished %s on a chunk of %s (lastChunk %v)", done.ID, ev.Artifact.ID, ev.LastChunk)
			}
			// Whatever the assembler accepts and finishes can be named.
			if _, err := artifacts.Digest(done); err != nil {
				t.Fatalf("Digest of a finished artifact: %v", err)
			}
		}
		seen := map[a2a.ArtifactID]bool{}
		for _, a := range as.Pending() {
			if seen[a.ID] {
				t.Fatalf("Pending lists %s twice", a.ID)
			}
			seen[a.ID] = true
		}
	})
}

// FuzzCollector streams arbitrary chunks through a Collector. It must never
// panic or fail to store, and it must accept the final task an honest peer
// would hold (the same chunks assembled, open artifacts taken as they are);
// a final task with one artifact changed is accepted (the stream saw it
// only in part) or refused with ErrMismatch, never with another error.
func FuzzCollector(f *testing.F) {
	f.Add([]byte("\x00\x00\x08chunk-1 \x03\x00\x07chunk-2"))
	f.Add([]byte("\x00\x01\x05draft\x00\x01\x05final\x03\x01\x01!"))
	f.Add([]byte("\x01\x02\x03abc\x02\x02\x03def"))
	f.Add([]byte("\x00\x00\x1f0123456789012345678901234567890\x05\x00\x1f0123456789012345678901234567890"))
	f.Add([]byte("\x08\x00\x02ab\x0a\x03\x03xyz\x10\x00\x00\x0e\x00\x00"))
	store, err := artifacts.NewStore(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		const limit = 48
		c := artifacts.NewCollector(store, artifacts.WithMaxBytes(limit))
		honest := artifacts.NewAssembler(artifacts.WithMaxBytes(limit))
		final := map[a2a.ArtifactID]*a2a.Artifact{}
		var order []a2a.ArtifactID
		put := func(a *a2a.Artifact) {
			if _, ok := final[a.ID]; !ok {
				order = append(order, a.ID)
			}
			final[a.ID] = a
		}
		for _, ev := range decodeEvents(b) {
			if err := c.Add(t.Context(), ev); err != nil {
				t.Fatalf("Add: %v", err)
			}
			if done, err := honest.Add(ev); err == nil && done != nil {
				put(done)
			}
		}
		if err := c.Finish(t.Context()); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		for _, a := range honest.Pending() {
			put(a)
		}
		var arts []*a2a.Artifact
		for _, id := range order {
			arts = append(arts, final[id])
		}
		if err := c.Check(arts); err != nil {
			t.Fatalf("Check of the honest final task: %v", err)
		}
		for i, a := range arts {
			if _, err := artifacts.Digest(a); err != nil {
				continue
			}
			changed := slices.Clone(arts)
			changed[i] = &a2a.Artifact{ID: a.ID, Parts: append(slices.Clone(a.Parts), a2a.NewTextPart("+"))}
			if err := c.Check(changed); err != nil && !errors.Is(err, artifacts.ErrMismatch) {
				t.Fatalf("Check of a changed final task: %v, want nil or ErrMismatch", err)
			}
		}
	})
}
