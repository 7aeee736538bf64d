package tasks

import (
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// FuzzSealed: whatever a config's secrets hold, sealing hides them and
// opening gives them back; and a stored value that starts like a sealed one
// but was not sealed here opens to an ErrUnsealable error, never to a
// panic or to a value.
func FuzzSealed(f *testing.F) {
	f.Add("tok-1", "cred-1", "sealed:v1:00000000:AAAA")
	f.Add("", "", "sealed:v1:")
	f.Add("sealed:v1:x", "a\x00b", "sealed:v1:deadbeef:!!!")
	s, err := NewSealer([]byte("fuzz-secret-0123456789abcdef0123456789"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, token, cred, stored string) {
		cfg := &a2a.PushConfig{TaskID: "t", ID: "c", URL: "https://hook", Token: token, Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: cred}}
		sealed, err := s.Seal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if (token != "" && sealed.Token == token) || (cred != "" && sealed.Auth.Credentials == cred) {
			t.Fatalf("a secret stayed in clear: %+v", sealed)
		}
		opened, err := s.Open(sealed)
		if err != nil || opened.Token != token || opened.Auth.Credentials != cred {
			t.Fatalf("open(seal) = %+v, %v", opened, err)
		}
		if cfg.Token != token || cfg.Auth.Credentials != cred {
			t.Fatal("seal changed the caller's config")
		}
		forged := &a2a.PushConfig{TaskID: "t", ID: "c", Token: sealedPrefix + stored}
		if got, err := s.Open(forged); !errors.Is(err, ErrUnsealable) {
			t.Fatalf("open of %q = %+v, %v; want ErrUnsealable", forged.Token, got, err)
		}
	})
}
