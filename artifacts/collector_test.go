package artifacts_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/handoff-a2a/handoff/artifacts"
)

func finalArt(id, content string) *a2a.Artifact {
	return &a2a.Artifact{ID: a2a.ArtifactID(id), Parts: []*a2a.Part{a2a.NewTextPart(content)}}
}

func TestCollector(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []a2a.Event
		final  []*a2a.Artifact
		want   error
		stored []string // contents the store must hold afterwards
	}{{
		name: "chunks agree with the final task",
		events: []a2a.Event{
			chunk("a1", false, false, a2a.NewTextPart("chunk-1 ")),
			chunk("a1", true, true, a2a.NewTextPart("chunk-2")),
		},
		final:  []*a2a.Artifact{{ID: "a1", Parts: []*a2a.Part{a2a.NewTextPart("chunk-1 "), a2a.NewTextPart("chunk-2")}}},
		stored: []string{"chunk-1 ", "chunk-2"},
	}, {
		name: "the final task says something else",
		events: []a2a.Event{
			chunk("a1", false, false, a2a.NewTextPart("paid")),
			chunk("a1", true, true, a2a.NewTextPart(" 10 EUR")),
		},
		final: []*a2a.Artifact{{ID: "a1", Parts: []*a2a.Part{a2a.NewTextPart("paid"), a2a.NewTextPart(" 1000 EUR")}}},
		want:  artifacts.ErrMismatch,
	}, {
		name:   "a streamed artifact is missing from the final task",
		events: []a2a.Event{chunk("a1", false, true, a2a.NewTextPart("receipt"))},
		final:  []*a2a.Artifact{finalArt("a2", "other")},
		want:   artifacts.ErrMismatch,
	}, {
		name: "no lastChunk: at the end what was streamed is whole",
		events: []a2a.Event{
			chunk("a1", false, false, a2a.NewTextPart("one")),
			chunk("a1", true, false, a2a.NewTextPart("two")),
		},
		final: []*a2a.Artifact{finalArt("a1", "one")},
		want:  artifacts.ErrMismatch,
	}, {
		name: "only the tail (a restart): the final task decides",
		events: []a2a.Event{
			chunk("a1", true, false, a2a.NewTextPart("middle")),
			chunk("a1", true, true, a2a.NewTextPart("end")),
		},
		final: []*a2a.Artifact{finalArt("a1", "whatever the peer kept")},
	}, {
		name: "a resubscribe's snapshot, then the appends",
		events: []a2a.Event{
			&a2a.Task{ID: "task-1", ContextID: "ctx-1", Artifacts: []*a2a.Artifact{finalArt("a1", "start ")}},
			chunk("a1", true, true, a2a.NewTextPart("end")),
		},
		final:  []*a2a.Artifact{{ID: "a1", Parts: []*a2a.Part{a2a.NewTextPart("start "), a2a.NewTextPart("end")}}},
		stored: []string{"start ", "end"},
	}, {
		name: "over the limit: the final task decides",
		events: []a2a.Event{
			chunk("a1", false, false, a2a.NewTextPart("0123456789")),
			chunk("a1", true, true, a2a.NewTextPart("0123456789")),
		},
		final: []*a2a.Artifact{finalArt("a1", "short")},
	}, {
		name:   "a malformed chunk and a nil event are ignored",
		events: []a2a.Event{(*a2a.TaskArtifactUpdateEvent)(nil), chunk("", false, true, a2a.NewTextPart("x")), chunk("a1", false, true, nil)},
		final:  nil,
	}} {
		for _, keep := range []bool{false, true} {
			name := tc.name
			if keep {
				name += ", kept first"
			}
			t.Run(name, func(t *testing.T) {
				store, err := artifacts.NewStore(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				c := artifacts.NewCollector(store, artifacts.WithMaxBytes(15))
				for _, ev := range tc.events {
					if err := c.Add(t.Context(), ev); err != nil {
						t.Fatalf("Add: %v", err)
					}
				}
				if err := c.Finish(t.Context()); err != nil {
					t.Fatalf("Finish: %v", err)
				}
				if keep { // the digests Keep returns are the ones Check holds the stream to
					kept, err := c.Keep(t.Context(), tc.final)
					if err != nil || len(kept) != len(tc.final) {
						t.Fatalf("Keep = %v, %v", kept, err)
					}
					for i, a := range tc.final {
						if want, _ := artifacts.Digest(a); kept[i] != want {
							t.Fatalf("Keep digest %d = %s, want %s", i, kept[i], want)
						}
						if _, err := store.Get(t.Context(), kept[i]); err != nil {
							t.Fatalf("final artifact %d not stored: %v", i, err)
						}
					}
				}
				if err := c.Check(tc.final); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
					t.Fatalf("Check = %v, want %v", err, tc.want)
				}
				if tc.stored == nil {
					return
				}
				var parts []*a2a.Part
				for _, s := range tc.stored {
					parts = append(parts, a2a.NewTextPart(s))
				}
				d, err := artifacts.Digest(&a2a.Artifact{Parts: parts})
				if err != nil {
					t.Fatal(err)
				}
				if got, err := store.Get(t.Context(), d); err != nil || len(got.Parts) != len(parts) {
					t.Fatalf("the streamed artifact was not stored: %v %v", got, err)
				}
			})
		}
	}
}

// Keep refuses a final artifact over the store's limit, naming it.
func TestCollectorKeepTooLarge(t *testing.T) {
	store, err := artifacts.NewStore(t.TempDir(), artifacts.WithMaxBytes(4))
	if err != nil {
		t.Fatal(err)
	}
	c := artifacts.NewCollector(store)
	if _, err := c.Keep(t.Context(), []*a2a.Artifact{finalArt("a1", "ok"), finalArt("a2", "too long")}); !errors.Is(err, artifacts.ErrTooLarge) ||
		!strings.Contains(err.Error(), "a2") {
		t.Fatalf("Keep = %v, want ErrTooLarge naming a2", err)
	}
}

// A large artifact streamed in chunks is written and hashed as the chunks
// arrive: the Collector's live heap does not grow with it (it held every
// chunk's parts until the last), its digest is the assembled artifact's,
// and nothing is left in the store's temp directory.
func TestCollectorSpoolsLargeArtifacts(t *testing.T) {
	dir := t.TempDir()
	store, err := artifacts.NewStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	const chunkSize, chunks = 1 << 20, 8
	content := func(i int) []byte {
		b := make([]byte, chunkSize)
		for j := range b {
			b[j] = byte((i*chunkSize + j) * 7 % 251)
		}
		return b
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	c := artifacts.NewCollector(store)
	before := heap()
	for i := range chunks - 1 {
		if err := c.Add(t.Context(), chunk("big", i > 0, false, a2a.NewRawPart(content(i)))); err != nil {
			t.Fatal(err)
		}
	}
	if grown := int64(heap()) - int64(before); grown > 2<<20 {
		t.Errorf("the live heap grew %d bytes over %d MiB streamed, want under 2 MiB", grown, chunks-1)
	}
	if err := c.Add(t.Context(), chunk("big", true, true, a2a.NewRawPart(content(chunks-1)))); err != nil {
		t.Fatal(err)
	}
	whole := &a2a.Artifact{ID: "big"}
	for i := range chunks {
		whole.Parts = append(whole.Parts, a2a.NewRawPart(content(i)))
	}
	if err := c.Check([]*a2a.Artifact{whole}); err != nil {
		t.Fatalf("Check of the assembled artifact: %v", err)
	}
	d, err := artifacts.Digest(whole)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := store.Get(t.Context(), d); err != nil || len(got.Parts) != chunks {
		t.Fatalf("Get(%s) = %v parts, %v", d, got, err)
	}
	// Given up half way, a spooled artifact leaves no temp file.
	c = artifacts.NewCollector(store)
	for i := range 3 {
		if err := c.Add(t.Context(), chunk("other", i > 0, false, a2a.NewRawPart(content(i+1)))); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if tmp, err := os.ReadDir(filepath.Join(dir, "tmp")); err != nil || len(tmp) != 0 {
		t.Fatalf("temp files left: %v %v", tmp, err)
	}
}
