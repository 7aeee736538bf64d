package skill

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/artifacts"
	"github.com/handoff-a2a/handoff/delegation"
)

// TestDelegatePresentsLargePartsAsBlobs: a raw part over the skill's
// threshold reaches the caller as the URL Outbound.BlobURL names, marked
// with BlobKey and kept in the artifact store; a smaller one stays inline,
// and a peer's own BlobKey is removed.
func TestDelegatePresentsLargePartsAsBlobs(t *testing.T) {
	store, err := artifacts.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := &Outbound{Artifacts: store, BlobURL: func(task a2a.TaskID, tenant, digest string) string {
		return "https://agent/blobs/" + string(task) + "/" + digest + "?tenant=" + tenant
	}}
	d := NewDelegate("scan", DelegateSpec{BlobThreshold: 4}, out)
	big, small := a2a.NewRawPart([]byte("0123456789")), a2a.NewRawPart([]byte("0123"))
	small.Metadata = map[string]any{BlobKey: map[string]any{"digest": "sha256:forged"}}
	ec := &a2asrv.ExecutorContext{TaskID: "t1", Tenant: "acme"}
	arts, err := d.present(t.Context(), ec, []*a2a.Artifact{{Name: "scan", Parts: []*a2a.Part{big, small}}})
	if err != nil {
		t.Fatal(err)
	}
	parts := arts[0].Parts
	u, ok := parts[0].Content.(a2a.URL)
	meta, _ := parts[0].Metadata[BlobKey].(map[string]any)
	digest, _ := meta["digest"].(string)
	if !ok || digest == "" || string(u) != "https://agent/blobs/t1/"+digest+"?tenant=acme" {
		t.Fatalf("large part: %#v, want a blob URL with its digest", parts[0])
	}
	rb, err := store.OpenRaw(digest)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	if b, _ := io.ReadAll(rb); !bytes.Equal(b, []byte("0123456789")) {
		t.Fatalf("stored blob %q", b)
	}
	if _, inline := parts[1].Content.(a2a.Raw); !inline || parts[1].Metadata[BlobKey] != nil {
		t.Fatalf("small part: %#v, want it inline without the peer's blob key", parts[1])
	}
	if small.Metadata[BlobKey] == nil {
		t.Fatal("present changed the peer's part in place")
	}
}

// TestDelegateWithoutAPeer: with no verified peer for the skill, the task
// fails saying so, and a quiet peer may take the delegation's timeout and a
// minute.
func TestDelegateWithoutAPeer(t *testing.T) {
	dir, err := delegation.NewDirectory(nil)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDelegate("pay", DelegateSpec{Skill: "payments", Timeout: 3 * time.Minute}, &Outbound{Peers: dir})
	if got := d.QuietFor(nil); got != 4*time.Minute {
		t.Errorf("QuietFor = %s, want the timeout and a minute", got)
	}
	ec := &a2asrv.ExecutorContext{TaskID: a2a.NewTaskID(), ContextID: a2a.NewContextID(),
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("pay"))}
	st, msg := last(run(t, d, ec))
	if st != a2a.TaskStateFailed || !strings.Contains(messageText(msg), "No verified peer offers skill payments") {
		t.Fatalf("ended %s %q, want failed for want of a peer", st, messageText(msg))
	}
}
