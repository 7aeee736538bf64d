package push_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/handoff-a2a/handoff/push"
)

// fakeResolver answers from a table, so no test sends a DNS query. A host
// with several answers gets them in turn, the last one repeated: that is
// how a rebinding name answers differently at check time and at dial time.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]string
	asked   map[string]int
}

func newResolver(answers map[string][][]string) *fakeResolver {
	return &fakeResolver{answers: answers, asked: make(map[string]int)}
}

func (r *fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq, ok := r.answers[host]
	if !ok {
		return nil, fmt.Errorf("lookup %s: no such host", host)
	}
	i := min(r.asked[host], len(seq)-1)
	r.asked[host]++
	var out []net.IPAddr
	for _, s := range seq[i] {
		out = append(out, net.IPAddr{IP: net.ParseIP(s)})
	}
	return out, nil
}

// trap is a loopback listener that fails the test if anything connects.
func trap(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Errorf("the guard let a connection reach %s", ln.Addr())
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func TestCheckURL(t *testing.T) {
	res := newResolver(map[string][][]string{
		"example.test":  {{"93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"}},
		"internal.test": {{"127.0.0.1"}},
		"mixed.test":    {{"93.184.216.34", "10.1.2.3"}},
		"ula.test":      {{"fd12:3456::1"}},
		"nat64.test":    {{"64:ff9b::a9fe:a9fe"}},     // 169.254.169.254 behind NAT64
		"nat64ok.test":  {{"64:ff9b::5db8:d822"}},     // 93.184.216.34 behind NAT64
		"intranet.test": {{"10.9.8.7"}},               // allowed through the 10.9.0.0/16 entry
		"hooks.test":    {{"192.168.1.10"}},           // allowed by name
		"mapped.test":   {{"::ffff:169.254.169.254"}}, // IPv4-mapped metadata address
	})
	g := push.NewGuard([]string{"Hooks.Test.", "10.9.0.0/16", "[fd00::7]"}, push.WithResolver(res))
	for _, tc := range []struct {
		url, why string // why: "" accepted, else a word of the refusal
	}{
		{"https://example.test/hook", ""},
		{"https://EXAMPLE.test./hook", ""},
		{"https://93.184.216.34/", ""},
		{"https://nat64ok.test/", ""},
		{"https://intranet.test/", ""},
		{"http://hooks.test:8080/a", ""},
		{"http://10.9.0.1/", ""},
		{"http://[fd00::7]:9000/", ""},
		{"http://169.254.169.254/latest/meta-data/", "plain http"},
		{"http://10.0.0.1/", "plain http"},
		{"http://localhost/", "plain http"},
		{"http://example.test/", "plain http"},
		{"http://intranet.test/", "plain http"},
		{"https://169.254.169.254/", "link-local"},
		{"https://10.0.0.1/", "private"},
		{"https://172.16.5.4/", "private"},
		{"https://192.168.0.1/", "private"},
		{"https://127.0.0.1/", "loopback"},
		{"https://[::1]/", "loopback"},
		{"https://[::ffff:127.0.0.1]/", "loopback"},
		{"https://[fe80::1]/", "link-local"},
		{"https://[fd00::8]/", "unique local"},
		{"https://100.64.0.1/", "carrier-grade NAT"},
		{"https://224.0.0.1/", "multicast"},
		{"https://[ff02::1]/", "multicast"},
		{"https://0.0.0.0/", "unspecified"},
		{"https://[::]/", "unspecified"},
		{"https://255.255.255.255/", "broadcast"},
		{"https://localhost/", "loopback name"},
		{"https://api.localhost/", "loopback name"},
		{"https://internal.test/", "resolves to 127.0.0.1, a loopback"},
		{"https://mixed.test/", "resolves to 10.1.2.3"},
		{"https://ula.test/", "unique local"},
		{"https://nat64.test/", "link-local address (where cloud metadata services answer) behind NAT64"},
		{"https://mapped.test/", "link-local"},
		{"https://nowhere.test/", "does not resolve"},
		{"ftp://example.test/", "scheme"},
		{"https:///path", "no host"},
		{"://bad", "not a URL"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			err := g.CheckURL(t.Context(), tc.url)
			if tc.why == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, push.ErrTargetRefused) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("got %v, want ErrTargetRefused saying %q", err, tc.why)
			}
		})
	}
}

func TestCheckURLNeverEchoesTheURL(t *testing.T) {
	g := push.NewGuard(nil, push.WithResolver(newResolver(nil)))
	err := g.CheckURL(t.Context(), "http://10.0.0.1/hook?token=s3cret")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error %v", err)
	}
}

func TestClientReachesAllowListedServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello")
	}))
	t.Cleanup(srv.Close)
	g := push.NewGuard([]string{"127.0.0.1"}, push.WithResolver(newResolver(nil)))
	if err := g.CheckURL(t.Context(), srv.URL); err != nil {
		t.Fatal(err)
	}
	resp, err := g.Client(testTimeout).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s", resp.Status)
	}
}

func TestClientRefusesRedirects(t *testing.T) {
	port := trap(t)
	// The server is allow-listed by name, not by address: a name that is not
	// on the list and resolves to the same loopback address is refused.
	res := newResolver(map[string][][]string{"hooks.test": {{"127.0.0.1"}}, "internal.test": {{"127.0.0.1"}}})
	var mu sync.Mutex
	hops := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/rebind":
			http.Redirect(w, r, "https://internal.test:"+port+"/", http.StatusTemporaryRedirect)
		case "/loop":
			mu.Lock()
			hops++
			mu.Unlock()
			http.Redirect(w, r, "/loop", http.StatusFound)
		}
	}))
	t.Cleanup(srv.Close)
	client := push.NewGuard([]string{"hooks.test"}, push.WithResolver(res)).Client(testTimeout)
	_, srvPort, _ := net.SplitHostPort(srv.Listener.Addr().String())
	base := "http://hooks.test:" + srvPort
	for _, tc := range []struct{ path, why string }{
		{"/metadata", "plain http"},
		{"/rebind", "resolves to 127.0.0.1"},
		{"/loop", "more than 3 redirects"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := client.Post(base+tc.path, "application/json", strings.NewReader("{}"))
			if err == nil {
				resp.Body.Close()
				t.Fatalf("followed the redirect: %s", resp.Status)
			}
			if !errors.Is(err, push.ErrTargetRefused) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("got %v, want ErrTargetRefused saying %q", err, tc.why)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if hops != 1+3 {
		t.Errorf("the loop was requested %d times, want the first request and 3 redirects", hops)
	}
}

// A name that resolves to a public address when the config is created and to
// loopback when the delivery is sent must not reach loopback.
func TestClientRefusesDNSRebinding(t *testing.T) {
	port := trap(t)
	res := newResolver(map[string][][]string{"rebind.test": {{"93.184.216.34"}, {"127.0.0.1"}}})
	g := push.NewGuard(nil, push.WithResolver(res))
	target := "https://rebind.test:" + port + "/hook"
	if err := g.CheckURL(t.Context(), target); err != nil {
		t.Fatalf("CheckURL: %v", err)
	}
	resp, err := g.Client(testTimeout).Post(target, "application/json", strings.NewReader("{}"))
	if err == nil {
		resp.Body.Close()
		t.Fatal("delivered to a rebound name")
	}
	if !errors.Is(err, push.ErrTargetRefused) || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("got %v, want ErrTargetRefused at dial", err)
	}
}

// The client checks the URL rules on the first request too, not only on
// redirects: a config stored before the rules changed is still refused.
func TestClientRefusesPlainHTTP(t *testing.T) {
	port := trap(t)
	client := push.NewGuard(nil, push.WithResolver(newResolver(nil))).Client(testTimeout)
	resp, err := client.Get("http://127.0.0.1:" + port + "/")
	if err == nil {
		resp.Body.Close()
		t.Fatal("request sent")
	}
	if !errors.Is(err, push.ErrTargetRefused) {
		t.Fatalf("got %v", err)
	}
}

// A name that stops resolving after the config was created fails the
// delivery with an ordinary error, not a refusal: DNS failures pass, and the
// delivery is worth retrying.
func TestClientLookupFailureIsNotARefusal(t *testing.T) {
	res := newResolver(map[string][][]string{"flaky.test": {{"93.184.216.34"}, {}}})
	g := push.NewGuard(nil, push.WithResolver(res))
	if err := g.CheckURL(t.Context(), "https://flaky.test/"); err != nil {
		t.Fatal(err)
	}
	resp, err := g.Client(testTimeout).Get("https://flaky.test/")
	if err == nil {
		resp.Body.Close()
		t.Fatal("request sent")
	}
	if errors.Is(err, push.ErrTargetRefused) || !strings.Contains(err.Error(), "no address") {
		t.Fatalf("got %v, want a lookup error that is not ErrTargetRefused", err)
	}
}
