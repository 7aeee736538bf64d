package tasks

import (
	"net/url"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// FuzzSealedURL: whatever a push URL holds, sealing and opening give it
// back; a sealed one keeps in clear only its masked form, which holds none
// of its userinfo or query.
func FuzzSealedURL(f *testing.F) {
	f.Add("https://u:p@hooks.example/a?b=c#d")
	f.Add("https://hooks.example/#sealed:v1:00000000:AAAA")
	f.Add("https://hooks.example/plain")
	f.Add("://bad#x")
	f.Add("https://hooks.example/p?")
	s, err := NewSealer([]byte("fuzz-secret-0123456789abcdef0123456789"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		cfg := &a2a.PushConfig{TaskID: "t", ID: "c", URL: raw}
		sealed, err := s.Seal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		opened, err := s.Open(sealed)
		if err != nil || opened.URL != raw {
			t.Fatalf("open(seal(%q)) = %+v, %v", raw, opened, err)
		}
		if !secretURL(raw) {
			if sealed.URL != raw {
				t.Fatalf("a URL with no secret was changed: %q", sealed.URL)
			}
			return
		}
		shown, _, ok := strings.Cut(sealed.URL, "#"+sealedPrefix)
		if !ok || shown != MaskedURL(raw) {
			t.Fatalf("stored %q, want the masked URL then the sealed value", sealed.URL)
		}
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			m, err := url.Parse(shown)
			if err != nil || m.User == nil || m.User.String() != "%2A%2A%2A" {
				t.Fatalf("the stored URL %q does not mask the userinfo of %q as ***", shown, raw)
			}
		}
	})
}
