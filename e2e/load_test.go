package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/uuid"
	"golang.org/x/sys/unix"
)

// The load test's shape and its bounds (#14, acceptance).
const (
	loadIdleConns   = 2000 // idle keep-alive connections, each after one /healthz
	loadSlowBodies  = 60   // unauthenticated 4 MiB bodies, trickled
	loadFlooders    = 8    // callers sending tokens of unknown kid
	loadFloodEvery  = 40 * time.Millisecond
	loadDuration    = 12 * time.Second // two stalled JWKS fetches (5s timeout, 1s min refresh) fit
	loadCallEvery   = 20 * time.Millisecond
	loadRedialEvery = 50 // calls on one connection of the authenticated caller
	loadP99         = 100 * time.Millisecond
	loadP99Ratio    = 10        // p99 under load within this many times the idle p99, when that exceeds loadP99
	loadRSSAbove    = 200 << 20 // bytes of RSS above idle
	loadAgentFiles  = 1024      // the agent's open file limit: 2,000 connections must not exhaust it
	loadMaxConns    = 512       // server.max_connections, well inside loadAgentFiles
	loadJWKSStall   = 8 * time.Second
	loadIssuer      = "https://idp.load.test"
	loadAudience    = "load-agent"
	loadRedialPause = time.Second // a closed idle or slow connection dials again after this
)

// TestLoadAuthenticatedCallerUnaffected: 2,000 idle connections, 60 slow
// unauthenticated 4 MiB bodies and a flood of tokens whose kid sends the
// agent to a JWKS endpoint that stalls 8s, all at once, against a real
// handoff process whose open file limit is 1,024: an authenticated caller
// (a JWT whose key the agent holds) keeps a p99 under 100ms (or, on a
// machine where its idle p99 is over 10ms, under 10 times that), the agent's
// RSS stays under 200 MB above idle, and it never runs out of descriptors.
func TestLoadAuthenticatedCallerUnaffected(t *testing.T) {
	raiseFileLimit(t, loadIdleConns+loadSlowBodies+loadFlooders+512)
	known, unknown := newLoadKey(t, "k-known"), newLoadKey(t, "k-unknown")

	var jwksFetches atomic.Int32
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if jwksFetches.Add(1) > 1 { // the first fetch answers; every later one stalls
			select {
			case <-time.After(loadJWKSStall):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(known.jwks)
	}))
	t.Cleanup(jwks.Close)

	dir := t.TempDir()
	config := filepath.Join(dir, "agent.yaml")
	yaml := fmt.Sprintf(`name: Load
description: the load test's agent
log: {level: warn}
limits: {shutdown_grace: 1s}
server: {max_connections: %d, max_connections_per_ip: 0, read_timeout: 5s}
auth:
  jwt_issuers: [{issuer: %q, audience: %q, jwks_url: %q, jwks_min_refresh: 1s}]
skills: [{id: tck, name: T, executor: tck}]
`, loadMaxConns, loadIssuer, loadAudience, jwks.URL)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ag := launchLoadAgent(t, config, freeAddr(t), filepath.Join(dir, "data"))
	pid := ag.cmd.Process.Pid
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: loadAgentFiles, Max: loadAgentFiles}, nil); err != nil {
		t.Fatalf("lower the agent's open file limit: %v", err)
	}

	// The authenticated caller, on one keep-alive connection; it creates a
	// task (the JWKS's first, fast, fetch) and then reads it.
	caller := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 10 * time.Second}
	t.Cleanup(caller.CloseIdleConnections)
	bearer := known.token(t, "caller")
	status, out := loadRPC(t, caller, ag.base, bearer, "SendMessage",
		fmt.Sprintf(`{"message":{"messageId":%q,"role":"ROLE_USER","parts":[{"text":"hi"}]}}`, uniqueID("tck-complete-task")))
	if status != http.StatusOK {
		t.Fatalf("the authenticated caller's SendMessage: %d %s", status, out)
	}
	var sent struct {
		Result struct {
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out, &sent); err != nil || sent.Result.Task.ID == "" {
		t.Fatalf("SendMessage answered no task: %s", out)
	}
	getTask := fmt.Sprintf(`{"id":%q}`, sent.Result.Task.ID)
	// Warm the caller's path and the agent's heap, then measure the same
	// calls on the idle agent: the baseline the load is judged against, on
	// this machine, now (go test runs other packages beside this one).
	var quiet []time.Duration
	for i := range 120 {
		if i%loadRedialEvery == 0 {
			caller.CloseIdleConnections()
		}
		start := time.Now()
		if status, out := loadRPC(t, caller, ag.base, bearer, "GetTask", getTask); status != http.StatusOK || !bytes.Contains(out, []byte(`"result"`)) {
			t.Fatalf("GetTask before the load: %d %s", status, out)
		}
		if i >= 20 {
			quiet = append(quiet, time.Since(start))
		}
		time.Sleep(loadCallEvery / 4)
	}
	slices.Sort(quiet)
	quietP99 := quiet[len(quiet)*99/100]
	// Starved, the caller would wait out the stalled JWKS (seconds) or a
	// full connection table; served, it stays within a bound of its quiet
	// self. The bound is the absolute goal, or a ratio of the baseline
	// when this machine is slower than that goal allows.
	p99Bound := max(loadP99, loadP99Ratio*quietP99)
	idleRSS := vmRSS(t, pid)

	ctx, stop := context.WithTimeout(t.Context(), loadDuration)
	defer stop()
	var load sync.WaitGroup
	var idleOpen, idleClosed, slowRefused, floodRefused, floodBusy, floodServed atomic.Int64

	// 2,000 idle keep-alive connections; one the agent closes dials again.
	dials := make(chan struct{}, 64) // dials in flight: the opening burst stays orderly
	for range loadIdleConns {
		load.Go(func() {
			for ctx.Err() == nil {
				dials <- struct{}{}
				c, err := (&net.Dialer{}).DialContext(ctx, "tcp", ag.addr)
				<-dials
				if err == nil {
					if healthzOn(c) {
						idleOpen.Add(1)
						waitClosed(ctx, c) // idle: nothing is sent, only the close is watched
						if ctx.Err() == nil {
							idleClosed.Add(1)
						}
					}
					c.Close()
				}
				pause(ctx, loadRedialPause)
			}
		})
	}
	// 60 slow bodies without credentials.
	for range loadSlowBodies {
		load.Go(func() {
			for ctx.Err() == nil {
				if trickleBody(ctx, ag.addr) {
					slowRefused.Add(1)
				}
				pause(ctx, loadRedialPause)
			}
		})
	}
	// Tokens of unknown kid, each a new kid: every one sends the agent to
	// the stalled JWKS.
	for range loadFlooders {
		load.Go(func() {
			c := &http.Client{Timeout: 20 * time.Second}
			defer c.CloseIdleConnections()
			tick := time.NewTicker(loadFloodEvery)
			defer tick.Stop()
			for ctx.Err() == nil {
				tok := unknown.tokenWithKid(t, "flood", "k-"+uuid.NewString())
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ag.base+"/a2a/jsonrpc",
					strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`))
				req.Header.Set("A2A-Version", "1.0")
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tok)
				if resp, err := c.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					switch {
					case resp.StatusCode == http.StatusUnauthorized:
						floodRefused.Add(1)
					case resp.StatusCode == http.StatusServiceUnavailable: // no connection spare
						floodBusy.Add(1)
					case resp.StatusCode < 300:
						floodServed.Add(1)
					}
				}
				select {
				case <-ctx.Done():
				case <-tick.C:
				}
			}
		})
	}
	// What the agent holds, sampled while the load runs.
	var peakRSS, peakFiles int64
	load.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			peakRSS = max(peakRSS, vmRSS(t, pid))
			peakFiles = max(peakFiles, openFiles(pid))
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	})

	// The authenticated caller, measured while all of it runs; it dials a
	// new connection now and then, as clients do.
	var latencies []time.Duration
	var failures []string
	retried := 0
	tick := time.NewTicker(loadCallEvery)
	for ctx.Err() == nil {
		if len(latencies)%loadRedialEvery == 0 {
			caller.CloseIdleConnections()
		}
		start := time.Now()
		status, out := loadRPC(t, caller, ag.base, bearer, "GetTask", getTask)
		if status == http.StatusServiceUnavailable && ctx.Err() == nil {
			// A new connection that came while no connection could be
			// closed for it (each busy, or spare for under 250ms: the flood
			// redials all the time) is refused with Retry-After: 1, since
			// the agent cannot know who dials before reading a request. A
			// client retries as asked (here up to three times); the call
			// must then be served, and such calls must stay rare.
			retried++
			for try := 0; try < 3 && status == http.StatusServiceUnavailable && ctx.Err() == nil; try++ {
				pause(ctx, time.Second)
				status, out = loadRPC(t, caller, ag.base, bearer, "GetTask", getTask)
			}
		}
		latencies = append(latencies, time.Since(start))
		if status != http.StatusOK || !bytes.Contains(out, []byte(`"result"`)) {
			failures = append(failures, fmt.Sprintf("%d %.200s", status, out))
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	tick.Stop()
	stop()
	load.Wait()

	slices.Sort(latencies)
	p := func(q float64) time.Duration { return latencies[min(len(latencies)-1, int(q*float64(len(latencies))))] }
	p99 := p(0.99)
	t.Logf("authenticated caller: %d calls, p50 %s, p99 %s, max %s, %d retried after a 503, %d failed",
		len(latencies), p(0.5), p99, latencies[len(latencies)-1], retried, len(failures))
	t.Logf("agent: RSS idle %d MB, peak %d MB; peak open files %d (limit %d, max_connections %d)",
		idleRSS>>20, peakRSS>>20, peakFiles, loadAgentFiles, loadMaxConns)
	t.Logf("load: %d idle connections opened, %d closed by the agent; %d slow bodies refused; unknown-kid tokens: %d refused, %d answered 503, %d served; %d JWKS fetches",
		idleOpen.Load(), idleClosed.Load(), slowRefused.Load(), floodRefused.Load(), floodBusy.Load(), floodServed.Load(), jwksFetches.Load())

	if len(failures) > 0 {
		t.Errorf("%d of the authenticated caller's %d calls failed; first: %s", len(failures), len(latencies), failures[0])
	}
	if retried*50 > len(latencies) {
		t.Errorf("%d of the authenticated caller's %d calls were refused 503 first (more than 2%%)", retried, len(latencies))
	}
	t.Logf("authenticated caller on the idle agent: p99 %s; bound under load %s", quietP99, p99Bound)
	if p99 >= p99Bound {
		t.Errorf("authenticated caller p99 = %s, want under %s (idle p99 %s)", p99, p99Bound, quietP99)
	}
	if above := peakRSS - idleRSS; above >= loadRSSAbove {
		t.Errorf("agent RSS rose %d MB above idle (%d MB), want under %d MB", above>>20, idleRSS>>20, loadRSSAbove>>20)
	}
	if idleOpen.Load() < loadMaxConns {
		t.Errorf("only %d idle connections were opened: the load did not reach the cap of %d", idleOpen.Load(), loadMaxConns)
	}
	if floodRefused.Load() == 0 || floodServed.Load() != 0 || jwksFetches.Load() < 2 {
		t.Errorf("the unknown-kid flood: %d refused, %d served, %d JWKS fetches; want none served, and the stalled JWKS asked",
			floodRefused.Load(), floodServed.Load(), jwksFetches.Load())
	}
	if slowRefused.Load() < loadSlowBodies {
		t.Errorf("only %d slow unauthenticated bodies were refused, want each of the %d refused", slowRefused.Load(), loadSlowBodies)
	}
	if log := ag.stderr.String(); strings.Contains(log, "too many open files") {
		t.Errorf("the agent ran out of file descriptors:\n%s", log)
	}
	if status, body, err := httpGet(t.Context(), ag.base+"/healthz"); err != nil || status != http.StatusOK {
		t.Errorf("/healthz after the load: %d %q %v", status, body, err)
	}
}

// launchLoadAgent starts `handoff serve` as launch does, from a binary
// without the race detector: the load test measures latency and memory as
// shipped, which the detector multiplies.
func launchLoadAgent(t *testing.T, config, addr, dataDir string) *agent {
	t.Helper()
	bin := handoffBin
	if raceEnabled {
		bin = filepath.Join(t.TempDir(), "handoff")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/handoff-a2a/handoff/cmd/handoff").CombinedOutput(); err != nil {
			t.Fatalf("build handoff without -race: %v\n%s", err, out)
		}
	}
	a := &agent{t: t, dataDir: dataDir, addr: addr, base: "http://" + addr, stderr: &syncBuffer{}, exited: make(chan struct{})}
	a.cmd = exec.Command(bin, "serve", "--config", config, "--listen", addr, "--data-dir", dataDir)
	a.cmd.Stdout, a.cmd.Stderr = a.stderr, a.stderr
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("start the agent: %v", err)
	}
	go func() {
		_ = a.cmd.Wait()
		a.state = a.cmd.ProcessState
		close(a.exited)
	}()
	t.Cleanup(func() {
		if code := a.stop(os.Interrupt); code != 0 {
			t.Errorf("the agent exited with code %d after SIGINT, want 0", code)
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", a.stderr.String())
		}
	})
	a.waitReady()
	return a
}

// raiseFileLimit raises this process's soft open file limit to at least
// n, as far as the hard limit allows, for the load's client sockets.
func raiseFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatalf("getrlimit: %v", err)
	}
	if rl.Cur >= n {
		return
	}
	if rl.Max < n {
		t.Fatalf("the open file limit's hard cap is %d; the load test needs %d descriptors (ulimit -Hn)", rl.Max, n)
	}
	rl.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatalf("setrlimit: %v", err)
	}
}

// loadKey is an Ed25519 key of the load test's issuer.
type loadKey struct {
	priv jose.JSONWebKey
	jwks []byte
}

func newLoadKey(t *testing.T, kid string) loadKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: kid, Algorithm: string(jose.EdDSA), Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	return loadKey{priv: jose.JSONWebKey{Key: priv, KeyID: kid, Algorithm: string(jose.EdDSA)}, jwks: b}
}

// token is a JWT of the issuer for subject, under the key's own kid.
func (k loadKey) token(t *testing.T, subject string) string {
	return k.tokenWithKid(t, subject, k.priv.KeyID)
}

// tokenWithKid is a JWT of the issuer for subject, naming kid.
func (k loadKey) tokenWithKid(t *testing.T, subject, kid string) string {
	key := k.priv
	key.KeyID = kid
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Error(err)
		return ""
	}
	s, err := jwt.Signed(sig).Claims(jwt.Claims{Issuer: loadIssuer, Subject: subject, Audience: jwt.Audience{loadAudience},
		Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour)), IssuedAt: jwt.NewNumericDate(time.Now())}).Serialize()
	if err != nil {
		t.Error(err)
	}
	return s
}

// loadRPC posts one JSON-RPC 1.0 call with a bearer token.
func loadRPC(t *testing.T, c *http.Client, base, bearer, method, params string) (int, []byte) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/a2a/jsonrpc", strings.NewReader(body))
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := c.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// healthzOn sends GET /healthz on c and reports whether it was answered 200.
func healthzOn(c net.Conn) bool {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n"); err != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitClosed returns when the peer closes c or ctx ends.
func waitClosed(ctx context.Context, c net.Conn) {
	stop := context.AfterFunc(ctx, func() { _ = c.SetReadDeadline(time.Now()) })
	defer stop()
	_, _ = c.Read(make([]byte, 1))
}

// trickleBody sends a 4 MiB POST without credentials, 64 KiB every 100ms,
// until the agent answers or closes; it reports whether the agent refused
// it (401) before the body was through.
func trickleBody(ctx context.Context, addr string) bool {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	const size = 4 << 20
	if _, err := io.WriteString(c, "POST /a2a/jsonrpc HTTP/1.1\r\nHost: agent\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\nContent-Length: "+
		strconv.Itoa(size)+"\r\n\r\n"); err != nil {
		return false
	}
	answered := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	chunk := bytes.Repeat([]byte(" "), 64<<10)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for sent := 0; sent < size; sent += len(chunk) {
		select {
		case status := <-answered:
			return status == http.StatusUnauthorized
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
		if _, err := c.Write(chunk); err != nil {
			break
		}
	}
	return <-answered == http.StatusUnauthorized
}

// pause waits d or until ctx ends: the pacing of a client that dials again.
func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// vmRSS is the resident set size of process pid, in bytes.
func vmRSS(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Errorf("read the agent's status: %v", err)
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Errorf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Errorf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// openFiles is how many descriptors process pid has open.
func openFiles(pid int) int64 {
	entries, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return int64(len(entries))
}
