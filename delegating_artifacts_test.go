package handoff

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
	"github.com/handoff-a2a/handoff/delegation"
	"github.com/handoff-a2a/handoff/internal/auth"
)

// scanSize is the raw part the peer streams: above the front's 64 KiB
// blob threshold, so the front's caller gets it by URL.
const scanSize = 100 << 10

// scan is the peer's raw content: not a repeated byte, so a wrong offset shows.
func scan() []byte {
	b := make([]byte, scanSize)
	for i := range b {
		b[i] = byte(i * 7 % 251)
	}
	return b
}

// chunkingPeer is an a2a-go executor that streams its artifacts in chunks:
// a receipt (one chunk, lastChunk) and a scan whose text part comes first
// and whose large raw part is appended after. With release set, it
// closes held after the scan's first chunk and waits for release; its
// server then closes subscribed when a client subscribes to the task.
type chunkingPeer struct {
	held, release, subscribed chan struct{}
}

func (c chunkingPeer) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) ||
			!yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		receipt := a2a.NewArtifactEvent(ec, a2a.NewDataPart(map[string]any{"receipt": "r-123"}))
		receipt.Artifact.Name, receipt.LastChunk = "receipt", true
		first := a2a.NewArtifactEvent(ec, a2a.NewTextPart("scan of order 123"))
		first.Artifact.Name = "scan"
		raw := a2a.NewRawPart(scan())
		raw.Filename, raw.MediaType = "scan.png", "image/png"
		last := a2a.NewArtifactUpdateEvent(ec, first.Artifact.ID, raw)
		last.LastChunk = true
		for _, ev := range []a2a.Event{receipt, first, last, a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil)} {
			if ev == last && c.release != nil {
				close(c.held)
				<-c.release
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func (chunkingPeer) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// lyingGetTask answers GetTask with a receipt other than the one its task streamed.
type lyingGetTask struct{ a2asrv.RequestHandler }

func (l lyingGetTask) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	t, err := l.RequestHandler.GetTask(ctx, req)
	if err != nil {
		return nil, err
	}
	c := *t
	c.Artifacts = nil
	for _, a := range t.Artifacts {
		if a.Name == "receipt" {
			a = &a2a.Artifact{ID: a.ID, Name: a.Name, Parts: []*a2a.Part{a2a.NewDataPart(map[string]any{"receipt": "r-999"})}}
		}
		c.Artifacts = append(c.Artifacts, a)
	}
	return &c, nil
}

// notifySubscribe closes subscribed when a client first subscribes to a task.
type notifySubscribe struct {
	a2asrv.RequestHandler
	once       *sync.Once
	subscribed chan struct{}
}

func (n notifySubscribe) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	n.once.Do(func() { close(n.subscribed) })
	return n.RequestHandler.SubscribeToTask(ctx, req)
}

// startChunkingPeer serves chunkingPeer over a2a-go's own JSON-RPC handler
// with a signed card whose jku is the peer's JWKS; lying makes its GetTask lie.
func startChunkingPeer(t *testing.T, lying bool, tag string) string {
	t.Helper()
	return startPeerWith(t, chunkingPeer{}, lying, tag)
}

// startPeerWith serves the executor x (a chunkingPeer, or any other) the
// same way.
func startPeerWith(t *testing.T, x a2asrv.AgentExecutor, lying bool, tag string) string {
	t.Helper()
	key, err := agentcard.GenerateKey(jose.EdDSA, "peer-1")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := agentcard.NewKeySet(time.Hour, agentcard.Key{JWK: key})
	if err != nil {
		t.Fatal(err)
	}
	var h a2asrv.RequestHandler = a2asrv.NewHandler(x)
	if lying {
		h = lyingGetTask{h}
	}
	if c, ok := x.(chunkingPeer); ok && c.subscribed != nil {
		h = notifySubscribe{RequestHandler: h, once: new(sync.Once), subscribed: c.subscribed}
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	card, err := agentcard.Sign(&a2a.AgentCard{
		Name: "Scanner", Description: "scans orders", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL+"/a2a/jsonrpc", a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: true, Extensions: []a2a.AgentExtension{delegation.ExtensionDeclaration()}},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"application/json"},
		Skills: []a2a.AgentSkill{{ID: "scan", Name: "Scan", Description: "Scans an order.", Tags: []string{tag}}},
	}, key, srv.URL+"/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	cardBody, err := json.Marshal(card)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := keys.JWKS(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("GET /.well-known/agent-card.json", staticJSON(cardBody, time.Minute))
	mux.Handle("GET /.well-known/jwks.json", staticJSON(jwks, time.Minute))
	mux.Handle("POST /a2a/jsonrpc", a2asrv.NewJSONRPCHandler(h))
	return srv.URL
}

// keyHeader sends an API key with every request of an a2a-go client.
type keyHeader struct{ key string }

func (k keyHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-API-Key", k.key)
	return http.DefaultTransport.RoundTrip(r)
}

// streamSkill sends text to skill over a2a-go's streaming client with an
// API key and returns the task as the stream left it, and how many
// artifact events the stream carried.
func streamSkill(t *testing.T, front, key, skill string) (*a2a.Task, int) {
	t.Helper()
	hc := &http.Client{Transport: keyHeader{key}}
	c, err := a2aclient.NewFromEndpoints(t.Context(),
		[]*a2a.AgentInterface{a2a.NewAgentInterface(front+pathJSONRPC, a2a.TransportProtocolJSONRPC)},
		a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("scan order 123"))
	msg.Metadata = map[string]any{"handoff/skill": skill}
	var id a2a.TaskID
	artifacts := 0
	for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: msg}) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if id == "" {
			id = ev.TaskInfo().TaskID
		}
		if _, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
			artifacts++
		}
	}
	task, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return task, artifacts
}

// getBlob fetches a blob URL with an API key.
func getBlob(t *testing.T, u, key string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestDelegatedArtifactsStreamAndBlobs: the peer streams its artifacts in
// chunks; the front assembles them, holds them to the peer's final task,
// commits, and hands its caller the large raw part as a URL that only
// that caller can fetch. A peer whose final task contradicts its stream
// commits nothing.
func TestDelegatedArtifactsStreamAndBlobs(t *testing.T) {
	honest, liar := startChunkingPeer(t, false, "honest"), startChunkingPeer(t, true, "liar")
	dir := t.TempDir()
	contract := filepath.Join(dir, "scan.yaml")
	body := `skill: %s
version: "1"
artifacts:
  receipt: {type: object, required: [receipt]}
commit_requires:
  - {artifact: receipt, pointer: /receipt}
`
	for _, s := range []string{"scan", "scan-liar"} {
		if err := os.WriteFile(filepath.Join(dir, s+".yaml"), fmt.Appendf(nil, body, s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	front := startFromYAML(t, "front.yaml", fmt.Sprintf(`name: Front
description: delegates scans
log: {level: error}
limits: {shutdown_grace: 1s}
auth:
  api_keys: [{name: alice, sha256: %s}, {name: bob, sha256: %s}]
peers:
  - {name: honest, url: %q, trust: {jku_prefixes: [%q]}}
  - {name: liar, url: %q, trust: {jku_prefixes: [%q]}}
skills:
  - {id: scan, name: Scan, executor: delegate, delegate: {skill: scan, tags: [honest], contract: %q}}
  - {id: scan-liar, name: Liar, executor: delegate, delegate: {skill: scan, tags: [liar], contract: %q}}
`, auth.HashAPIKey("alice-key"), auth.HashAPIKey("bob-key"), honest, honest+"/.well-known/", liar, liar+"/.well-known/",
		contract, filepath.Join(dir, "scan-liar.yaml")))

	task, streamed := streamSkill(t, front, "alice-key", "scan")
	if task.Status.State != a2a.TaskStateCompleted || streamed != 2 {
		t.Fatalf("state %s (%d artifact events): %v", task.Status.State, streamed, task.Status.Message)
	}
	var blob *a2a.Part
	var texts []string
	for _, a := range task.Artifacts {
		for _, p := range a.Parts {
			switch c := p.Content.(type) {
			case a2a.URL:
				blob = p
			case a2a.Raw:
				t.Fatalf("a %d-byte raw part reached the caller inline", len(c))
			case a2a.Text:
				texts = append(texts, string(c))
			}
		}
	}
	if blob == nil || strings.Join(texts, "") != "scan of order 123" {
		t.Fatalf("artifacts: %+v", task.Artifacts)
	}
	u := string(blob.Content.(a2a.URL))
	if !strings.HasPrefix(u, front+"/a2a/blobs/"+string(task.ID)+"/sha256:") || blob.Filename != "scan.png" || blob.MediaType != "image/png" {
		t.Fatalf("blob part: %s %+v", u, blob)
	}

	resp, got := getBlob(t, u, "alice-key")
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, scan()) {
		t.Fatalf("owner: %s, %d bytes", resp.Status, len(got))
	}
	if ct, cl := resp.Header.Get("Content-Type"), resp.Header.Get("Content-Length"); ct != "image/png" || cl != fmt.Sprint(scanSize) {
		t.Fatalf("owner: Content-Type %q Content-Length %q", ct, cl)
	}
	if d := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(d, "attachment") {
		t.Fatalf("Content-Disposition %q", d)
	}

	other := strings.Replace(u, "sha256:", "sha256:0", 1)[:len(u)]
	for _, tc := range []struct{ name, url, key string }{
		{"another principal", u, "bob-key"},
		{"unknown digest", other, "alice-key"},
		{"malformed digest", front + "/a2a/blobs/" + string(task.ID) + "/sha256:..%2F..", "alice-key"},
		{"unknown task", strings.Replace(u, string(task.ID), "no-such-task", 1), "alice-key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := getBlob(t, tc.url, tc.key)
			if resp.StatusCode != http.StatusNotFound || bytes.Contains(b, scan()[:64]) {
				t.Fatalf("%s: %s, %d bytes", tc.name, resp.Status, len(b))
			}
		})
	}
	if resp, _ := getBlob(t, u, "wrong-key"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no credential: %s", resp.Status)
	}

	// A blob changed on disk is never sent whole: the response is cut short.
	hx := u[strings.LastIndex(u, "sha256:")+len("sha256:"):]
	path := filepath.Join(frontDir(t, front), "artifacts", "raw", "sha256", hx[:2], hx[2:])
	damaged := scan()
	damaged[len(damaged)-1] ^= 1
	if err := os.WriteFile(path, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	req.Header.Set("X-API-Key", "alice-key")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil || len(b) >= scanSize {
			t.Fatalf("damaged blob: %s, %d bytes, read error %v; want it cut short", resp.Status, len(b), err)
		}
	}

	// The liar's final task names another receipt than the one it streamed.
	// Nothing reached its caller: artifacts are passed on only at commit.
	task, streamed = streamSkill(t, front, "alice-key", "scan-liar")
	msg := ""
	if task.Status.Message != nil && len(task.Status.Message.Parts) > 0 {
		msg = task.Status.Message.Parts[0].Text()
	}
	if task.Status.State != a2a.TaskStateFailed || !strings.Contains(msg, "disagree") || len(task.Artifacts) != 0 || streamed != 0 {
		t.Fatalf("liar: %s %q %v (%d artifact events)", task.Status.State, msg, task.Artifacts, streamed)
	}
}

// frontConfig is a front agent delegating scans to peer, with alice's and
// bob's API keys and the given approvers.
func frontConfig(t *testing.T, peer, dataDir, approvers string) *Config {
	t.Helper()
	contract := func(skill string) string {
		path := filepath.Join(dataDir, skill+".yaml")
		body := fmt.Sprintf("skill: %s\nversion: \"1\"\nartifacts:\n  receipt: {type: object, required: [receipt]}\n"+
			"commit_requires:\n  - {artifact: receipt, pointer: /receipt}\n", skill)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	c, err := ParseConfig("front.yaml", strings.NewReader(fmt.Sprintf(`name: Front
description: delegates scans
log: {level: error}
limits: {shutdown_grace: 1s}
auth:
  api_keys: [{name: alice, sha256: %s}, {name: bob, sha256: %s}]
approvers: %s
peers: [{name: honest, url: %q, trust: {jku_prefixes: [%q]}}]
skills:
  - {id: scan, name: Scan, executor: delegate, delegate: {skill: scan, contract: %q}}
  - {id: scan-inline, name: Inline, executor: delegate, delegate: {skill: scan, contract: %q, blob_threshold: 200000}}
`, auth.HashAPIKey("alice-key"), auth.HashAPIKey("bob-key"), approvers, peer, peer+"/.well-known/", contract("scan"), contract("scan-inline"))))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = dataDir
	return c
}

// TestDelegationsListFollowsReload: who sees every delegation follows the
// approvers a reload put in force, not the startup list.
func TestDelegationsListFollowsReload(t *testing.T) {
	peer := startChunkingPeer(t, false, "honest")
	dir := t.TempDir()
	var logs syncBuffer
	a, front := serveTools(t, frontConfig(t, peer, dir, `["key:bob"]`), &logs)
	if task, _ := streamSkill(t, front, "alice-key", "scan"); task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("scan: %s", task.Status.State)
	}
	seen := func(key string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, front+"/a2a/delegations", nil)
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Delegations []json.RawMessage }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return len(out.Delegations)
	}
	if a, b := seen("alice-key"), seen("bob-key"); a != 1 || b != 1 {
		t.Fatalf("before the reload: alice sees %d, bob (approver) %d; want 1, 1", a, b)
	}
	if err := a.Reload(frontConfig(t, peer, dir, "[]")); err != nil {
		t.Fatal(err)
	}
	if a, b := seen("alice-key"), seen("bob-key"); a != 1 || b != 0 {
		t.Fatalf("after the reload: alice sees %d, bob (no longer an approver) %d; want 1, 0", a, b)
	}
}

// TestBlobThreshold: a skill's blob_threshold decides which raw parts stay
// inline; a threshold that is not positive is a config error.
func TestBlobThreshold(t *testing.T) {
	front := startAgent(t, frontConfig(t, startChunkingPeer(t, false, "honest"), t.TempDir(), "[]"))
	task, _ := streamSkill(t, front, "alice-key", "scan-inline")
	inline := 0
	for _, a := range task.Artifacts {
		for _, p := range a.Parts {
			if raw, ok := p.Content.(a2a.Raw); ok && bytes.Equal(raw, scan()) {
				inline++
			}
		}
	}
	if task.Status.State != a2a.TaskStateCompleted || inline != 1 {
		t.Fatalf("%s: %d inline raw parts, want 1", task.Status.State, inline)
	}

	_, err := ParseConfig("front.yaml", strings.NewReader(`name: F
description: d
peers: [{name: p, url: "http://127.0.0.1:1", trust: {jku_prefixes: ["http://127.0.0.1:1/"]}}]
skills: [{id: s, name: S, executor: delegate, delegate: {skill: s, contract: c.yaml, blob_threshold: 0}}]
`))
	if err == nil || !strings.Contains(err.Error(), "blob_threshold") {
		t.Fatalf("blob_threshold 0: %v", err)
	}
}

// TestDelegationResumedArtifacts: the front stops while the peer is
// between two chunks of an artifact; after its restart it subscribes to
// the peer's task again, gets the task as it stands and the rest of the
// stream, and commits the artifacts of the peer's final task.
func TestDelegationResumedArtifacts(t *testing.T) {
	x := chunkingPeer{held: make(chan struct{}), release: make(chan struct{}), subscribed: make(chan struct{})}
	peer := startPeerWith(t, x, false, "honest")
	dir := t.TempDir()
	front := startAgent(t, frontConfig(t, peer, dir, "[]"))
	_, out := call(t, front, "X-API-Key", "alice-key", "SendMessage", `{"message":{"messageId":"resume-1","role":"ROLE_USER",
		"metadata":{"handoff/skill":"scan"},"parts":[{"text":"scan order 123"}]},"configuration":{"returnImmediately":true}}`)
	id, _ := resultTask(t, out)["id"].(string)
	select {
	case <-x.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the peer never reached the middle of its artifact")
	}
	stopAgent(t, front)
	front = startAgent(t, frontConfig(t, peer, dir, "[]"))
	select { // the last chunk comes once the restarted front listens again
	case <-x.subscribed:
	case <-time.After(10 * time.Second):
		t.Fatal("the restarted front never subscribed to the peer's task")
	}
	close(x.release)

	var task map[string]any
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, out = call(t, front, "X-API-Key", "alice-key", "GetTask", fmt.Sprintf(`{"id":%q}`, id))
		task, _ = out["result"].(map[string]any)
		if task != nil && state(task) != "TASK_STATE_WORKING" && state(task) != "TASK_STATE_SUBMITTED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still not done after the restart: %v", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := json.Marshal(task)
	if state(task) != "TASK_STATE_COMPLETED" || !strings.Contains(string(b), "/a2a/blobs/"+id+"/sha256:") ||
		!strings.Contains(string(b), "following the delegation") {
		t.Fatalf("after the restart: %s", b)
	}
}
