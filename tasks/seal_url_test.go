package tasks_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// TestSealedURLAtRest: a push URL with userinfo, a query or a fragment is
// sealed like a token: the stored value holds only its masked form, every
// read gives the URL back as given; without the sealer it is refused, and
// a store opened only to list shows it masked. A URL without any of these
// is stored as given.
func TestSealedURLAtRest(t *testing.T) {
	const secretURL = "https://hookuser:pa55word@hooks.example.com/path?sig=Q-SECRET-1"
	for _, b := range sealedBackends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			open, raw := b.place(t)
			s := open(t, tasks.WithSealer(sealer(t, secretA)))
			newSealedTask(t, s, "t1")
			configs := map[string]string{
				"secret":   secretURL,
				"fragment": "https://hooks.example.com/x#frag-SECRET",
				// Looks sealed, in clear from a client: it must read back as given.
				"forged": "https://hooks.example.com/y#sealed:v1:00000000:AAAA",
				"plain":  "https://hooks.example.com/plain",
			}
			for id, u := range configs {
				if err := s.PutPushConfig(ctx, alice, &a2a.PushConfig{TaskID: "t1", ID: id, URL: u, Token: token + id}); err != nil {
					t.Fatal(err)
				}
			}
			for id, u := range configs {
				got, err := s.GetPushConfig(ctx, alice, "t1", id)
				if err != nil || got.URL != u || got.Token != token+id {
					t.Fatalf("get %s: %+v, %v", id, got, err)
				}
			}
			ds, err := s.PushDeliveries(ctx, "t1")
			if err != nil || len(ds) != len(configs) {
				t.Fatalf("deliveries: %+v, %v", ds, err)
			}
			for _, d := range ds {
				if d.Config.URL != configs[d.Config.ID] {
					t.Errorf("delivery %s: URL %q, want %q", d.Config.ID, d.Config.URL, configs[d.Config.ID])
				}
			}
			stored := raw(t, "t1", "secret")
			for _, secret := range []string{"pa55word", "hookuser", "Q-SECRET-1", "sig="} {
				if bytes.Contains(stored, []byte(secret)) {
					t.Errorf("the stored config holds %q: %s", secret, stored)
				}
			}
			if !bytes.Contains(stored, []byte("https://***@hooks.example.com/path?***")) {
				t.Errorf("the stored config does not show its masked URL: %s", stored)
			}
			if frag := raw(t, "t1", "fragment"); bytes.Contains(frag, []byte("frag-SECRET")) {
				t.Errorf("the stored config holds its fragment: %s", frag)
			}
			if plain := raw(t, "t1", "plain"); !bytes.Contains(plain, []byte(`"https://hooks.example.com/plain"`)) {
				t.Errorf("a URL with nothing to hide was not stored as given: %s", plain)
			}

			s = open(t)
			if _, err := s.GetPushConfig(ctx, alice, "t1", "secret"); !errors.Is(err, tasks.ErrUnsealable) {
				t.Fatalf("get without a sealer: %v, want ErrUnsealable", err)
			}

			s = open(t, tasks.ListingOnly())
			ds, err = s.PushDeliveries(ctx, "t1")
			if err != nil || len(ds) != len(configs) {
				t.Fatalf("deliveries, listing only: %+v, %v", ds, err)
			}
			want := map[string]string{
				"secret":   "https://***@hooks.example.com/path?***",
				"fragment": "https://hooks.example.com/x",
				"forged":   "https://hooks.example.com/y",
				"plain":    "https://hooks.example.com/plain",
			}
			for _, d := range ds {
				if d.Config.URL != want[d.Config.ID] || d.Config.Token != "****" {
					t.Errorf("listing only, %s: URL %q token %q, want %q and a masked token", d.Config.ID, d.Config.URL, d.Config.Token, want[d.Config.ID])
				}
			}
		})
	}
}

func TestMaskedURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://hooks.example.com/path":                  "https://hooks.example.com/path",
		"https://hooks.example.com/path?token=s3cret":     "https://hooks.example.com/path?***",
		"https://u:p@hooks.example.com:8443/a/b?x=1#frag": "https://***@hooks.example.com:8443/a/b?***",
		"https://u@hooks.example.com/":                    "https://***@hooks.example.com/",
		"https://hooks.example.com/p#frag":                "https://hooks.example.com/p",
		"https://hooks.example.com/p?":                    "https://hooks.example.com/p?***",
		"https://***@hooks.example.com/path?***":          "https://***@hooks.example.com/path?***",
		"://bad?token=s3cret":                             "(unparsable URL)",
	} {
		if got := tasks.MaskedURL(in); got != want {
			t.Errorf("MaskedURL(%q) = %q, want %q", in, got, want)
		}
	}
}
