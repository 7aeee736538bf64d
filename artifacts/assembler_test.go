package artifacts_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/handoff-a2a/handoff/artifacts"
)

func chunk(id string, appendTo, last bool, parts ...*a2a.Part) *a2a.TaskArtifactUpdateEvent {
	return &a2a.TaskArtifactUpdateEvent{
		TaskID:    "task-1",
		ContextID: "ctx-1",
		Append:    appendTo,
		LastChunk: last,
		Artifact:  &a2a.Artifact{ID: a2a.ArtifactID(id), Parts: parts},
	}
}

func text(a *a2a.Artifact) string {
	var b strings.Builder
	for _, p := range a.Parts {
		b.WriteString(p.Text())
	}
	return b.String()
}

func TestAssemblerInOrder(t *testing.T) {
	as := artifacts.NewAssembler()
	first := chunk("a1", false, false, a2a.NewTextPart("chunk-1 "))
	first.Artifact.Name = "report"
	if done, err := as.Add(first); err != nil || done != nil {
		t.Fatalf("first chunk: done=%v err=%v", done, err)
	}
	if got := as.Pending(); len(got) != 1 || got[0].ID != "a1" {
		t.Fatalf("Pending = %v, want [a1]", got)
	}
	last := chunk("a1", true, true, a2a.NewTextPart("chunk-2"))
	last.Artifact.Metadata = map[string]any{"pages": 2}
	done, err := as.Add(last)
	if err != nil || done == nil {
		t.Fatalf("last chunk: done=%v err=%v", done, err)
	}
	if got := text(done); got != "chunk-1 chunk-2" {
		t.Errorf("text = %q, want %q", got, "chunk-1 chunk-2")
	}
	if done.Name != "report" || done.Metadata["pages"] != 2 {
		t.Errorf("name %q metadata %v: want the first chunk's name and the last chunk's metadata", done.Name, done.Metadata)
	}
	if len(first.Artifact.Parts) != 1 {
		t.Errorf("the first event's parts changed to %d: the assembler must not alias them", len(first.Artifact.Parts))
	}
	if got := as.Pending(); len(got) != 0 {
		t.Errorf("Pending after lastChunk = %v, want none", got)
	}
}

func TestAssemblerReplace(t *testing.T) {
	as := artifacts.NewAssembler()
	for _, ev := range []*a2a.TaskArtifactUpdateEvent{
		chunk("a1", false, false, a2a.NewTextPart("draft")),
		chunk("a1", true, false, a2a.NewTextPart(" more draft")),
		chunk("a1", false, false, a2a.NewTextPart("final")), // append=false: starts over
	} {
		if _, err := as.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	done, err := as.Add(chunk("a1", true, true, a2a.NewTextPart(" text")))
	if err != nil {
		t.Fatal(err)
	}
	if got := text(done); got != "final text" {
		t.Errorf("text = %q, want %q", got, "final text")
	}
}

func TestAssemblerUnknownAppend(t *testing.T) {
	as := artifacts.NewAssembler()
	_, err := as.Add(chunk("nope", true, false, a2a.NewTextPart("x")))
	if !errors.Is(err, artifacts.ErrUnknownArtifact) {
		t.Fatalf("err = %v, want ErrUnknownArtifact", err)
	}
	// A finished artifact is forgotten: appending to it is unknown too.
	if _, err := as.Add(chunk("a1", false, true, a2a.NewTextPart("whole"))); err != nil {
		t.Fatal(err)
	}
	if _, err := as.Add(chunk("a1", true, false, a2a.NewTextPart("late"))); !errors.Is(err, artifacts.ErrUnknownArtifact) {
		t.Fatalf("append after lastChunk: err = %v, want ErrUnknownArtifact", err)
	}
}

func TestAssemblerTooLarge(t *testing.T) {
	tests := []struct {
		name   string
		events []*a2a.TaskArtifactUpdateEvent
	}{
		{"one chunk", []*a2a.TaskArtifactUpdateEvent{
			chunk("a1", false, true, a2a.NewTextPart(strings.Repeat("x", 11))),
		}},
		{"appended", []*a2a.TaskArtifactUpdateEvent{
			chunk("a1", false, false, a2a.NewRawPart([]byte("123456"))),
			chunk("a1", true, true, a2a.NewRawPart([]byte("789012"))),
		}},
		{"data counted as json", []*a2a.TaskArtifactUpdateEvent{
			chunk("a1", false, true, a2a.NewDataPart(map[string]any{"key": "value"})), // {"key":"value"}: 15 bytes
		}},
		{"spread over artifacts", []*a2a.TaskArtifactUpdateEvent{
			chunk("a1", false, false, a2a.NewTextPart("123456")),
			chunk("a2", false, false, a2a.NewTextPart("789012")),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			as := artifacts.NewAssembler(artifacts.WithMaxBytes(10))
			var err error
			for _, ev := range tt.events {
				if _, err = as.Add(ev); err != nil {
					break
				}
			}
			if !errors.Is(err, artifacts.ErrTooLarge) {
				t.Fatalf("err = %v, want ErrTooLarge", err)
			}
		})
	}

	t.Run("refused artifact is dropped", func(t *testing.T) {
		as := artifacts.NewAssembler(artifacts.WithMaxBytes(10))
		if _, err := as.Add(chunk("a1", false, false, a2a.NewTextPart("12345678"))); err != nil {
			t.Fatal(err)
		}
		if _, err := as.Add(chunk("a1", true, false, a2a.NewTextPart("901"))); !errors.Is(err, artifacts.ErrTooLarge) {
			t.Fatalf("err = %v, want ErrTooLarge", err)
		}
		if _, err := as.Add(chunk("a1", true, true, a2a.NewTextPart("1"))); !errors.Is(err, artifacts.ErrUnknownArtifact) {
			t.Fatalf("append after refusal: err = %v, want ErrUnknownArtifact", err)
		}
		// Its bytes were released: a new artifact of the full limit fits.
		if _, err := as.Add(chunk("a2", false, true, a2a.NewTextPart("1234567890"))); err != nil {
			t.Fatalf("after refusal: %v", err)
		}
	})
}

func TestAssemblerInvalid(t *testing.T) {
	tests := []struct {
		name string
		ev   *a2a.TaskArtifactUpdateEvent
	}{
		{"nil event", nil},
		{"no artifact", &a2a.TaskArtifactUpdateEvent{TaskID: "t"}},
		{"no id", chunk("", false, true, a2a.NewTextPart("x"))},
		{"nil part", chunk("a1", false, true, nil)},
		{"empty url", chunk("a1", false, true, a2a.NewFileURLPart("", "text/plain"))},
		{"nil data", chunk("a1", false, true, a2a.NewDataPart(nil))},
		{"unencodable data", chunk("a1", false, true, a2a.NewDataPart(make(chan int)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := artifacts.NewAssembler().Add(tt.ev); !errors.Is(err, artifacts.ErrInvalidArtifact) {
				t.Fatalf("err = %v, want ErrInvalidArtifact", err)
			}
		})
	}
}
