package policy_test

import (
	"strings"
	"testing"

	"github.com/handoff-a2a/handoff/mcp/policy"
)

var pathCases = []struct {
	root, in, want string // want "" means an error
}{
	{"", "./exports/../payments/config.json", "payments/config.json"},
	{"", "payments//x/./y/", "payments/x/y"},
	{"", "", "."},
	{"", ".", "."},
	{"", "/", "."},
	{"", "/etc/passwd", "etc/passwd"},
	{"", "..", ""},
	{"", "a/../../b", ""},
	{"", "../../etc/passwd", ""},
	{"/srv", "/srv/data/x", "data/x"},
	{"/srv", "/srv", "."},
	{"/srv", "/srvx/data", ""},
	{"/srv", "/srv/../etc", ""},
	{"/srv/", "/srv/a/", "a"},
	{"/srv", "a\x00b", ""},
}

func TestCanonicalPath(t *testing.T) {
	for _, tc := range pathCases {
		got, err := policy.CanonicalPath(tc.root, tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("CanonicalPath(%q, %q) = %q, want an error", tc.root, tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("CanonicalPath(%q, %q) = %q, %v; want %q", tc.root, tc.in, got, err, tc.want)
		}
	}
}

var urlCases = []struct{ in, want string }{
	{"HTTPS://Example.COM:443/a", "https://example.com/a"},
	{"https://example.com/a", "https://example.com/a"},
	{"http://example.com:80", "http://example.com/"},
	{"http://example.com:8080/x/../y/", "http://example.com:8080/y/"},
	{"https://example.com:0443/", "https://example.com/"},
	{"https://user:pw@example.com/a#frag", "https://example.com/a"},
	{"https://bücher.example/ä", "https://xn--bcher-kva.example/%C3%A4"},
	{"https://EXAMPLE.com./a?b=C", "https://example.com/a?b=C"},
	{"https://[2001:DB8::1]:443/", "https://[2001:db8::1]/"},
	{"ftp://example.com/", ""},
	{"/relative", ""},
	{"https://", ""},
	{"https://example.com:99999/", ""},
}

func TestCanonicalURL(t *testing.T) {
	for _, tc := range urlCases {
		got, err := policy.CanonicalURL(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("CanonicalURL(%q) = %q, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("CanonicalURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestExtract(t *testing.T) {
	specs := []policy.ResourceSpec{
		{Pointer: "/files", Kind: policy.KindPath},
		{Pointer: "/target/url", Kind: policy.KindURL},
		{Pointer: "/a~1b", Kind: policy.KindID},
		{Pointer: "/absent", Kind: policy.KindID},
	}
	got, err := policy.Extract(specs, map[string]any{
		"files":  []any{"x/../y", "z"},
		"target": map[string]any{"url": "HTTP://A.example:80"},
		"a/b":    "ID-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []policy.Resource{{"path", "/files", "y"}, {"path", "/files", "z"}, {"url", "/target/url", "http://a.example/"}, {"id", "/a~1b", "ID-1"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := policy.Extract(specs[:1], map[string]any{"files": []any{"../x"}}); err == nil || !strings.Contains(err.Error(), "/files") {
		t.Errorf("escaping path: %v", err)
	}
	if err := policy.CheckSpecs([]policy.ResourceSpec{{Pointer: "x", Kind: "path"}, {Pointer: "/a", Kind: "file"}, {Pointer: "/b", Kind: "url", Root: "/"}, {Pointer: "/c", Kind: "path", Root: "rel"}}); err == nil ||
		!strings.Contains(err.Error(), "resources[0]") || !strings.Contains(err.Error(), "resources[1]") || !strings.Contains(err.Error(), "resources[2]") || !strings.Contains(err.Error(), "resources[3]") {
		t.Errorf("CheckSpecs: %v", err)
	}
}

func FuzzCanonicalPath(f *testing.F) {
	for _, tc := range pathCases {
		f.Add(tc.root, tc.in)
	}
	f.Fuzz(func(t *testing.T, root, p string) {
		if root != "" && !strings.HasPrefix(root, "/") {
			root = "/" + root
		}
		got, err := policy.CanonicalPath(root, p)
		if err != nil {
			return
		}
		if got == ".." || strings.HasPrefix(got, "../") || strings.HasPrefix(got, "/") || got == "" {
			t.Fatalf("CanonicalPath(%q, %q) = %q escapes its root", root, p, got)
		}
		again, err := policy.CanonicalPath(root, got)
		if err != nil || again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", p, got, again, err)
		}
	})
}

func FuzzCanonicalURL(f *testing.F) {
	for _, tc := range urlCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := policy.CanonicalURL(s)
		if err != nil {
			return
		}
		again, err := policy.CanonicalURL(got)
		if err != nil || again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", s, got, again, err)
		}
	})
}
