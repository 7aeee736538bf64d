package handoff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/push"
	"github.com/handoff-a2a/handoff/push/webhook"
)

// receiver is a real webhook endpoint that verifies every delivery with
// webhook.Verifier and records the events it accepted, in order.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	events []string        // "kind:state" of each accepted delivery
	ids    map[string]bool // delivery ids seen, to count duplicates
	dups   int
	fail   int // answer 503 to this many deliveries first
	got    chan struct{}
}

func newReceiver(t *testing.T, agentURL string, fail int) *receiver {
	r := &receiver{ids: map[string]bool{}, fail: fail, got: make(chan struct{}, 100)}
	mux := http.NewServeMux()
	r.srv = httptest.NewUnstartedServer(mux)
	r.srv.Start()
	t.Cleanup(r.srv.Close)
	v := webhook.NewVerifier(agentURL+"/.well-known/jwks.json", r.srv.URL+"/hook", webhook.WithToken("tok-123456789"))
	mux.Handle("/hook", v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.fail > 0 {
			r.fail--
			w.Header().Set("Retry-After", "0")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		vd, _ := webhook.VerifiedFrom(req.Context())
		if r.ids[vd.DeliveryID] {
			r.dups++
		}
		r.ids[vd.DeliveryID] = true
		r.events = append(r.events, eventKind(vd.Body))
		r.got <- struct{}{}
	})))
	return r
}

// eventKind summarises a StreamResponse body as "kind:state".
func eventKind(body []byte) string {
	var ev map[string]map[string]any
	_ = json.Unmarshal(body, &ev)
	for k, v := range ev {
		switch k {
		case "task":
			return "task:" + v["status"].(map[string]any)["state"].(string)
		case "statusUpdate":
			return "status:" + v["status"].(map[string]any)["state"].(string)
		}
		return k
	}
	return "?"
}

func (r *receiver) wait(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		r.mu.Lock()
		got := append([]string(nil), r.events...)
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-r.got:
		case <-deadline:
			t.Fatalf("received %d events, want %d: %v", len(got), n, got)
		}
	}
}

func pushConfig(t *testing.T, extra string) *Config {
	c, err := ParseConfig("push.yaml", strings.NewReader(minimalConfig+
		"log: {level: error}\nlimits: {shutdown_grace: 1s}\ncapabilities: {push_notifications: true}\n"+
		"push: {allow_hosts: [127.0.0.1], retry_delay: 10ms, timeout: 500ms"+extra+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	return c
}

func TestPushDeliversEveryEventInOrder(t *testing.T) {
	url := startAgent(t, pushConfig(t, ""))
	a, b := newReceiver(t, url, 0), newReceiver(t, url, 3) // b answers 503 three times first
	params := func(hook string) string {
		return fmt.Sprintf(`{"message":{"messageId":"tck-stream-001-x","role":"ROLE_USER","parts":[{"text":"hi"}]},
			"configuration":{"taskPushNotificationConfig":{"url":%q,"token":"tok-123456789"}}}`, hook)
	}
	// Two tasks, each with its own webhook: a healthy one and a flaky one.
	for _, r := range []*receiver{a, b} {
		if status, out := call(t, url, "", "", "SendMessage", params(r.srv.URL+"/hook")); status != http.StatusOK || out["result"] == nil {
			t.Fatalf("send: %d %v", status, out)
		}
	}
	want := "task:TASK_STATE_SUBMITTED,status:TASK_STATE_WORKING,artifactUpdate,status:TASK_STATE_COMPLETED"
	for name, r := range map[string]*receiver{"healthy": a, "503 three times": b} {
		got := strings.Join(r.wait(t, 4), ",")
		if got != want {
			t.Errorf("%s receiver got %s, want %s", name, got, want)
		}
		if r.dups != 0 {
			t.Errorf("%s receiver got %d duplicates", name, r.dups)
		}
	}
}

func TestPushDeadLettersAndDoesNotSlowTheTask(t *testing.T) {
	url := startAgent(t, pushConfig(t, ", max_attempts: 2"))
	block := make(chan struct{})
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never answers in time
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(block); dead.Close() })
	start := time.Now()
	status, out := call(t, url, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":"tck-complete-task-1","role":"ROLE_USER","parts":[{"text":"hi"}]},
		"configuration":{"taskPushNotificationConfig":{"url":%q}}}`, dead.URL+"/hook"))
	if status != http.StatusOK || out["result"] == nil {
		t.Fatalf("send: %d %v", status, out)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the task took %s with a dead webhook", took)
	}
	// Another task's webhook is served while the dead one is still being retried.
	healthy := newReceiver(t, url, 0)
	if status, out := call(t, url, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":"tck-complete-task-2","role":"ROLE_USER","parts":[{"text":"hi"}]},
		"configuration":{"taskPushNotificationConfig":{"url":%q,"token":"tok-123456789"}}}`, healthy.srv.URL+"/hook")); status != http.StatusOK || out["result"] == nil {
		t.Fatalf("send: %d %v", status, out)
	}
	healthy.wait(t, 2)
	for _, st := range pushStatuses(t, url) {
		if st.URL == dead.URL+"/hook" && len(st.Dead) > 0 {
			t.Fatal("the healthy webhook waited for the dead one to be given up")
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := pushStatuses(t, url)
		for _, s := range st {
			if s.URL == dead.URL+"/hook" && len(s.Dead) > 0 {
				if s.Dead[0].Attempts != 2 {
					t.Fatalf("dead after %d attempts, want 2", s.Dead[0].Attempts)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no dead letter: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPushTargetsAreGuarded(t *testing.T) {
	url := startAgent(t, pushConfig(t, ""))
	for _, target := range []string{"http://169.254.169.254/latest", "http://10.0.0.1/", "http://localhost/"} {
		_, out := call(t, url, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]},
			"configuration":{"taskPushNotificationConfig":{"url":%q}}}`, target))
		if errorCode(out) != -32602 {
			t.Errorf("%s: %v, want -32602", target, out)
		}
	}
}

// pushStatuses asks the agent where its (anonymous) caller's deliveries stand.
func pushStatuses(t *testing.T, url string) []push.Status {
	t.Helper()
	resp, err := http.Get(url + "/a2a/push/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Configs []push.Status `json:"configs"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("push status: %s", b)
	}
	return body.Configs
}

// TestPushConfigMethods03 drives the 0.3 push-config methods (no A2A-Version
// header) against the same store: set, get, list, delete.
func TestPushConfigMethods03(t *testing.T) {
	url := startAgent(t, pushConfig(t, ""))
	_, out := postJSONRPC(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m03","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`)
	task, _ := out["result"].(map[string]any)
	id, _ := task["id"].(string)
	if id == "" {
		t.Fatalf("0.3 send: %v", out)
	}
	rpc := func(method, params string) map[string]any {
		_, out := postJSONRPC(t, url, "", fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":%q,"params":%s}`, method, params))
		return out
	}
	set := rpc("tasks/pushNotificationConfig/set", fmt.Sprintf(`{"taskId":%q,"pushNotificationConfig":{"id":"w1","url":"http://127.0.0.1:9/hook","token":"a-long-secret-token"}}`, id))
	if set["result"] == nil || strings.Contains(fmt.Sprint(set), "a-long-secret-token") {
		t.Fatalf("set: %v", set)
	}
	get := rpc("tasks/pushNotificationConfig/get", fmt.Sprintf(`{"id":%q,"pushNotificationConfigId":"w1"}`, id))
	if !strings.Contains(fmt.Sprint(get["result"]), "http://127.0.0.1:9/hook") || strings.Contains(fmt.Sprint(get), "a-long-secret-token") {
		t.Fatalf("get: %v", get)
	}
	if list := rpc("tasks/pushNotificationConfig/list", fmt.Sprintf(`{"id":%q}`, id)); !strings.Contains(fmt.Sprint(list["result"]), "w1") {
		t.Fatalf("list: %v", list)
	}
	if del := rpc("tasks/pushNotificationConfig/delete", fmt.Sprintf(`{"id":%q,"pushNotificationConfigId":"w1"}`, id)); del["error"] != nil {
		t.Fatalf("delete: %v", del)
	}
	if get := rpc("tasks/pushNotificationConfig/get", fmt.Sprintf(`{"id":%q,"pushNotificationConfigId":"w1"}`, id)); errorCode(get) != -32001 {
		t.Fatalf("get after delete: %v", get)
	}
}

// authRecorder is a real webhook endpoint that records, per path, the
// Authorization and A2A-Push-Signature headers of each delivery.
type authRecorder struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string][][2]string // path → [authorization, signature] of each delivery
}

func newAuthRecorder(t *testing.T) *authRecorder {
	r := &authRecorder{got: map[string][][2]string{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		auth := "(none)"
		if vs, ok := req.Header["Authorization"]; ok {
			auth = strings.Join(vs, ",")
		}
		r.got[req.URL.Path] = append(r.got[req.URL.Path], [2]string{auth, req.Header.Get(webhook.HeaderSignature)})
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// first waits for the first delivery to path and returns its headers.
func (r *authRecorder) first(t *testing.T, path string) (auth, signature string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r.mu.Lock()
		got := r.got[path]
		r.mu.Unlock()
		if len(got) > 0 {
			return got[0][0], got[0][1]
		}
		if time.Now().After(deadline) {
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("no delivery to %s; got %v", path, r.got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPushBearerWithoutCredentials: a config whose authentication names
// Bearer and no credentials gets the push JWT as its bearer token, on the
// 0.3 (tasks/pushNotificationConfig/set) and the 1.0 path; one naming
// another scheme without credentials gets no Authorization header; never an
// empty credential.
func TestPushBearerWithoutCredentials(t *testing.T) {
	url := startAgent(t, pushConfig(t, ""))
	hooks := newAuthRecorder(t)
	// Each config is set on a task waiting for input, which the next message
	// completes: its last events are delivered to the config.
	set03 := func(path, auth string) {
		_, out := postJSONRPC(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"tck-input-required-`+path[1:]+`","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`)
		id, _ := out["result"].(map[string]any)["id"].(string)
		if id == "" {
			t.Fatalf("0.3 send: %v", out)
		}
		_, out = postJSONRPC(t, url, "", fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tasks/pushNotificationConfig/set","params":{"taskId":%q,"pushNotificationConfig":{"url":%q,"authentication":%s}}}`,
			id, hooks.srv.URL+path, auth))
		if out["result"] == nil {
			t.Fatalf("0.3 set %s: %v", path, out)
		}
		_, out = postJSONRPC(t, url, "", fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"message/send","params":{"message":{"messageId":"m-%s","taskId":%q,"role":"user","parts":[{"kind":"text","text":"go on"}]}}}`, path[1:], id))
		if out["result"] == nil {
			t.Fatalf("0.3 follow-up %s: %v", path, out)
		}
	}
	set10 := func(path, auth string) {
		_, out := call(t, url, "", "", "SendMessage", `{"message":{"messageId":"tck-input-required-`+path[1:]+`","role":"ROLE_USER","parts":[{"text":"hi"}]}}`)
		task, _ := out["result"].(map[string]any)["task"].(map[string]any)
		id, _ := task["id"].(string)
		if id == "" {
			t.Fatalf("1.0 send: %v", out)
		}
		if _, out := call(t, url, "", "", "CreateTaskPushNotificationConfig", fmt.Sprintf(`{"taskId":%q,"url":%q,"authentication":%s}`, id, hooks.srv.URL+path, auth)); out["result"] == nil {
			t.Fatalf("1.0 create %s: %v", path, out)
		}
		if _, out := call(t, url, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":"m-%s","taskId":%q,"role":"ROLE_USER","parts":[{"text":"go on"}]}}`, path[1:], id)); out["result"] == nil {
			t.Fatalf("1.0 follow-up %s: %v", path, out)
		}
	}
	set03("/v03-bearer", `{"schemes":["Bearer"]}`)
	set03("/v03-basic", `{"schemes":["Basic"]}`)
	set03("/v03-given", `{"schemes":["Bearer"],"credentials":"given-token"}`)
	set10("/v10-bearer", `{"scheme":"Bearer"}`)
	set10("/v10-lower", `{"scheme":"bearer"}`)
	set10("/v10-basic", `{"scheme":"Basic"}`)
	for _, tc := range []struct{ path, want string }{
		{"/v03-bearer", "jwt"}, {"/v10-bearer", "jwt"}, {"/v10-lower", "jwt"},
		{"/v03-basic", "(none)"}, {"/v10-basic", "(none)"},
		{"/v03-given", "Bearer given-token"},
	} {
		path, want := tc.path, tc.want
		auth, sig := hooks.first(t, path)
		if sig == "" {
			t.Errorf("%s: no %s header", path, webhook.HeaderSignature)
		}
		if want == "jwt" {
			want = "Bearer " + sig
		}
		if auth != want {
			t.Errorf("%s: Authorization %q, want %q", path, auth, want)
		}
	}
}

// TestPushDeadLetterReasonsAreGeneric: what the caller sees of a failed
// delivery (the push status's last error and dead letters) says the same
// for a closed port, a reset connection and a webhook that never answers,
// so a push config cannot probe port state; the operator's log has the
// detail.
func TestPushDeadLetterReasonsAreGeneric(t *testing.T) {
	logs := &syncBuffer{}
	_, url := serveAgent(t, pushConfig(t, ", max_attempts: 3"), WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + closed.Addr().String() + "/hook"
	closed.Close() // nothing listens there: connection refused

	reset, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reset.Close() })
	go func() {
		for {
			c, err := reset.Accept()
			if err != nil {
				return
			}
			_ = c.(*net.TCPConn).SetLinger(0) // close with a RST
			_, _ = c.Read(make([]byte, 1))
			c.Close()
		}
	}()
	resetURL := "http://" + reset.Addr().String() + "/hook"

	block := make(chan struct{})
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never answers within the push timeout
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(block); stall.Close() })
	stallURL := stall.URL + "/hook"

	targets := []string{closedURL, resetURL, stallURL}
	for i, target := range targets {
		status, out := call(t, url, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":"tck-complete-task-g%d","role":"ROLE_USER","parts":[{"text":"hi"}]},
			"configuration":{"taskPushNotificationConfig":{"url":%q}}}`, i, target))
		if status != http.StatusOK || out["result"] == nil {
			t.Fatalf("send: %d %v", status, out)
		}
	}
	seen := map[string]bool{} // every reason the caller was shown
	deadline := time.Now().Add(30 * time.Second)
	for {
		dead := map[string]string{}
		for _, s := range pushStatuses(t, url) {
			if s.LastError != "" {
				seen[s.LastError] = true
			}
			for _, d := range s.Dead {
				seen[d.Reason] = true
			}
			if len(s.Dead) > 0 {
				dead[s.URL] = s.Dead[0].Reason
			}
		}
		if len(dead) == len(targets) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead letters for %d of %d webhooks: %v", len(dead), len(targets), dead)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(seen) != 1 {
		t.Errorf("the caller was shown %d different reasons, want one: %v", len(seen), seen)
	}
	for r := range seen {
		for _, leak := range []string{"refused", "reset", "EOF", "timeout", "deadline", "127.0.0.1"} {
			if strings.Contains(r, leak) {
				t.Errorf("the reason shown to the caller %q says %q", r, leak)
			}
		}
	}
	for _, detail := range []string{"connection refused", "Client.Timeout"} {
		if !strings.Contains(logs.String(), detail) {
			t.Errorf("the operator's log does not say %q:\n%s", detail, logs.String())
		}
	}
	if l := logs.String(); !strings.Contains(l, "connection reset") && !strings.Contains(l, "EOF") {
		t.Errorf("the operator's log does not say how the reset connection failed:\n%s", l)
	}
}

// TestPushURLSealedAndMasked: a push URL with userinfo and a query is
// answered masked by create, get and list (1.0 and 0.3), is in no file of
// the data directory in clear, and is delivered to as given.
func TestPushURLSealedAndMasked(t *testing.T) {
	c := pushConfig(t, "")
	url := startAgent(t, c)
	var mu sync.Mutex
	var queries []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		queries = append(queries, r.URL.RawQuery)
	}))
	t.Cleanup(hook.Close)
	target := strings.Replace(hook.URL, "http://", "http://hookuser:Pw-SECRET-7@", 1) + "/hook?sig=Q-SECRET-7"
	masked := strings.Replace(hook.URL, "http://", "http://***@", 1) + "/hook?***"

	_, out := call(t, url, "", "", "SendMessage", `{"message":{"messageId":"tck-input-required-seal","role":"ROLE_USER","parts":[{"text":"hi"}]}}`)
	task, _ := out["result"].(map[string]any)["task"].(map[string]any)
	id, _ := task["id"].(string)
	if id == "" {
		t.Fatalf("send: %v", out)
	}
	answers := map[string]map[string]any{}
	_, answers["create"] = call(t, url, "", "", "CreateTaskPushNotificationConfig", fmt.Sprintf(`{"taskId":%q,"id":"w1","url":%q}`, id, target))
	_, answers["get"] = call(t, url, "", "", "GetTaskPushNotificationConfig", fmt.Sprintf(`{"taskId":%q,"id":"w1"}`, id))
	_, answers["list"] = call(t, url, "", "", "ListTaskPushNotificationConfigs", fmt.Sprintf(`{"taskId":%q}`, id))
	_, answers["0.3 get"] = postJSONRPC(t, url, "", fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tasks/pushNotificationConfig/get","params":{"id":%q,"pushNotificationConfigId":"w1"}}`, id))
	_, answers["0.3 list"] = postJSONRPC(t, url, "", fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tasks/pushNotificationConfig/list","params":{"id":%q}}`, id))
	for name, out := range answers {
		b, _ := json.Marshal(out["result"])
		if out["result"] == nil || strings.Contains(string(b), "SECRET") || !strings.Contains(string(b), masked) {
			t.Errorf("%s: %s, want the URL masked as %s", name, b, masked)
		}
	}
	for _, st := range pushStatuses(t, url) {
		if st.URL != masked {
			t.Errorf("push status URL %q, want %q", st.URL, masked)
		}
	}

	if _, out := call(t, url, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":"m-seal","taskId":%q,"role":"ROLE_USER","parts":[{"text":"go on"}]}}`, id)); out["result"] == nil {
		t.Fatalf("follow-up: %v", out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(queries)
		first := ""
		if n > 0 {
			first = queries[0]
		}
		mu.Unlock()
		if n > 0 {
			if first != "sig=Q-SECRET-7" {
				t.Errorf("delivered with query %q, want the URL's own", first)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no delivery")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopAgent(t, url)
	err := filepath.WalkDir(c.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, secret := range []string{"Pw-SECRET-7", "Q-SECRET-7"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds %s in clear", path, secret)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPushStopDoesNotDeadLetter: a delivery cut short because the agent
// stops is not an attempt that failed: it is not dead-lettered (even with
// max_attempts 1), and the restarted agent delivers the event.
func TestPushStopDoesNotDeadLetter(t *testing.T) {
	c, err := ParseConfig("push.yaml", strings.NewReader(minimalConfig+
		"log: {level: error}\nlimits: {shutdown_grace: 1s}\ncapabilities: {push_notifications: true}\n"+
		"push: {allow_hosts: [127.0.0.1], retry_delay: 10ms, timeout: 30s, max_attempts: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	var stalling atomic.Bool
	stalling.Store(true)
	arrived := make(chan struct{}, 100)
	ended := make(chan struct{})
	var mu sync.Mutex
	delivered := 0
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		if stalling.Load() {
			select { // never answers: the agent stops meanwhile
			case <-r.Context().Done():
			case <-ended:
			}
			return
		}
		mu.Lock()
		delivered++
		mu.Unlock()
	}))
	t.Cleanup(func() { close(ended); hook.Close() })
	url := startAgent(t, c)
	if status, out := call(t, url, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":"tck-complete-task-stop","role":"ROLE_USER","parts":[{"text":"hi"}]},
		"configuration":{"taskPushNotificationConfig":{"url":%q}}}`, hook.URL+"/hook")); status != http.StatusOK || out["result"] == nil {
		t.Fatalf("send: %d %v", status, out)
	}
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery started")
	}
	stopAgent(t, url)
	stalling.Store(false)

	url = startAgent(t, c)
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := delivered
		mu.Unlock()
		st := pushStatuses(t, url)
		for _, s := range st {
			if len(s.Dead) > 0 {
				t.Fatalf("dead-lettered by the stop: %+v", s.Dead)
			}
		}
		if len(st) == 1 && st[0].Pending == 0 && n > 0 && n == st[0].Delivered { // every event, the one cut short included
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivered %d events after the restart; status %+v", n, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
