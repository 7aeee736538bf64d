package handoff

import (
	"bytes"
	"context"
	"crypto/sha256"
	"iter"
	"net/http"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// largePeer streams one raw artifact of size bytes in 1 MiB chunks (the
// last one lastChunk), then the receipt frontConfig's contract requires.
type largePeer struct{ size int }

// largeContent is the byte at offset i of a largePeer's artifact: not a
// repeated byte, so a chunk out of place shows in the digest.
func largeContent(off, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((off + i) * 7 % 251)
	}
	return b
}

func (p largePeer) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		const chunk = 1 << 20
		var id a2a.ArtifactID
		for off := 0; off < p.size; off += chunk {
			part := a2a.NewRawPart(largeContent(off, min(chunk, p.size-off)))
			part.Filename, part.MediaType = "big.bin", "application/octet-stream"
			var ev *a2a.TaskArtifactUpdateEvent
			if off == 0 {
				ev = a2a.NewArtifactEvent(ec, part)
				ev.Artifact.Name, id = "big", ev.Artifact.ID
			} else {
				ev = a2a.NewArtifactUpdateEvent(ec, id, part)
			}
			ev.LastChunk = off+chunk >= p.size
			if !yield(ev, nil) {
				return
			}
		}
		receipt := a2a.NewArtifactEvent(ec, a2a.NewDataPart(map[string]any{"receipt": "r-123"}))
		receipt.Artifact.Name, receipt.LastChunk = "receipt", true
		if !yield(receipt, nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (largePeer) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// TestDelegatedArtifactAtTheLimit: the artifact limit counts an
// artifact's raw bytes, as the README says, so an artifact of exactly
// 16 MiB delegates and its caller fetches every byte as a blob; one byte
// more fails the delegation with an error that names the limit. (The
// limit once counted the canonical JSON, where base64 makes 16 MiB 22.)
func TestDelegatedArtifactAtTheLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 32 MiB through two agents")
	}
	const limit = 16 << 20
	for _, tc := range []struct {
		name string
		size int
		ok   bool
	}{{"at the limit", limit, true}, {"a byte over", limit + 1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			peer := startPeerWith(t, largePeer{size: tc.size}, false, "honest")
			front := startAgent(t, frontConfig(t, peer, t.TempDir(), "[]"))
			task, _ := streamSkill(t, front, "alice-key", "scan")
			msg := ""
			if task.Status.Message != nil && len(task.Status.Message.Parts) > 0 {
				msg = task.Status.Message.Parts[0].Text()
			}
			if !tc.ok {
				if task.Status.State != a2a.TaskStateFailed || !strings.Contains(msg, "16777216") {
					t.Fatalf("state %s %q; want failed, naming the limit", task.Status.State, msg)
				}
				return
			}
			if task.Status.State != a2a.TaskStateCompleted {
				t.Fatalf("state %s: %q", task.Status.State, msg)
			}
			// Each chunk's raw part is a blob of its own, in order.
			h, n := sha256.New(), 0
			for _, a := range task.Artifacts {
				for _, p := range a.Parts {
					if c, ok := p.Content.(a2a.URL); ok && a.Name == "big" {
						resp, got := getBlob(t, string(c), "alice-key")
						if resp.StatusCode != http.StatusOK {
							t.Fatalf("blob %s: %s", c, resp.Status)
						}
						h.Write(got)
						n += len(got)
					}
				}
			}
			if want := sha256.Sum256(largeContent(0, tc.size)); n != tc.size || !bytes.Equal(h.Sum(nil), want[:]) {
				t.Fatalf("blobs: %d bytes, want the %d the peer sent", n, tc.size)
			}
		})
	}
}
