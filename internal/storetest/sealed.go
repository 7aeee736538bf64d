package storetest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// Sealed is a store under test with its push secrets sealed.
type Sealed struct {
	// Open returns a store over the same data at every call (another process
	// or replica, after a key rotation), sealing with s; nil seals nothing.
	Open func(t *testing.T, s *tasks.Sealer) tasks.Store
	// Raw returns what the store keeps of push config id of task, as kept.
	Raw func(t *testing.T, task a2a.TaskID, id string) []byte
}

// RunSealed checks that push secrets sealed by a [tasks.Sealer] are kept
// sealed, read back opened, survive a key rotation, and are refused without
// their key, on stores placed by place: it is called once per subtest, with
// an empty store's data of its own.
func RunSealed(t *testing.T, place func(t *testing.T) Sealed) {
	t.Run("AtRest", func(t *testing.T) { testSealedAtRest(t, place) })
	t.Run("URLAtRest", func(t *testing.T) { testSealedURLAtRest(t, place) })
}

// Sealer returns a sealer of secrets, failing t if it cannot make one.
func Sealer(t testing.TB, secrets ...string) *tasks.Sealer {
	t.Helper()
	var bs [][]byte
	for _, s := range secrets {
		bs = append(bs, []byte(s))
	}
	s, err := tasks.NewSealer(bs...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// SecretA is a secret a test's [Sealer] may seal with, and secretB another;
// token and cred are the secrets of push configs, never to be kept in clear.
const (
	SecretA = "secret-A-0123456789abcdef0123456789abcdef"
	secretB = "secret-B-0123456789abcdef0123456789abcdef"
	token   = "TOKEN-in-clear-4f1d"
	cred    = "CREDENTIAL-in-clear-9c2e"
)

func secretConfig(task, id string) *a2a.PushConfig {
	return &a2a.PushConfig{TaskID: a2a.TaskID(task), ID: id, URL: "https://hook/" + id, Token: token + id,
		Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: cred + id}}
}

func newSealedTask(t *testing.T, s tasks.Store, id string) {
	t.Helper()
	snap := &tasks.Snapshot{Owner: alice, Version: 1, Updated: time.Now().UTC(),
		Task: &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}}
	if err := s.Append(t.Context(), snap, []a2a.Event{snap.Task}); err != nil {
		t.Fatal(err)
	}
}

// testSealedAtRest: the value a store keeps holds neither the token nor the
// credentials, while every read gives them back; a rotation keeps old
// values open while the old secret is configured, and without it they fail
// with ErrUnsealable, as they do on a store with no sealer.
func testSealedAtRest(t *testing.T, place func(t *testing.T) Sealed) {
	ctx := t.Context()
	b := place(t)
	s := b.Open(t, Sealer(t, SecretA))
	newSealedTask(t, s, "t1")
	if err := s.PutPushConfig(ctx, alice, secretConfig("t1", "old")); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetPushConfig(ctx, alice, "t1", "old")
	if err != nil || got.Token != token+"old" || got.Auth.Credentials != cred+"old" {
		t.Fatalf("get: %+v, %v", got, err)
	}
	stored := b.Raw(t, "t1", "old")
	for _, secret := range []string{token, cred} {
		if bytes.Contains(stored, []byte(secret)) {
			t.Fatalf("stored value holds %q: %s", secret, stored)
		}
	}
	if !bytes.Contains(stored, []byte("https://hook/old")) {
		t.Fatalf("stored value is not the config: %s", stored)
	}

	// Rotation: B seals, A still opens.
	s = b.Open(t, Sealer(t, secretB, SecretA))
	if err := s.PutPushConfig(ctx, alice, secretConfig("t1", "new")); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListPushConfigs(ctx, alice, "t1")
	if err != nil || len(all) != 2 || all[0].Token != token+"new" || all[1].Auth.Credentials != cred+"old" {
		t.Fatalf("list after rotation: %+v, %v", all, err)
	}
	ds, err := s.PushDeliveries(ctx, "t1")
	if err != nil || len(ds) != 2 || ds[1].Config.Token != token+"old" {
		t.Fatalf("deliveries after rotation: %+v, %v", ds, err)
	}

	// A retired: its value no longer opens, the new one does.
	s = b.Open(t, Sealer(t, secretB))
	if _, err := s.GetPushConfig(ctx, alice, "t1", "old"); !errors.Is(err, tasks.ErrUnsealable) {
		t.Fatalf("get under a retired key: %v, want ErrUnsealable", err)
	}
	if _, err := s.PushDeliveries(ctx, "t1"); !errors.Is(err, tasks.ErrUnsealable) {
		t.Fatalf("deliveries under a retired key: %v, want ErrUnsealable", err)
	}
	if got, err := s.GetPushConfig(ctx, alice, "t1", "new"); err != nil || got.Token != token+"new" {
		t.Fatalf("get under the current key: %+v, %v", got, err)
	}

	// No sealer: sealed values are refused, never handed over as they are.
	s = b.Open(t, nil)
	if _, err := s.ListPushConfigs(ctx, alice, "t1"); !errors.Is(err, tasks.ErrUnsealable) {
		t.Fatalf("list without a sealer: %v, want ErrUnsealable", err)
	}
}

// testSealedURLAtRest: a push URL with userinfo, a query or a fragment is
// sealed like a token: the stored value holds only its masked form, every
// read gives the URL back as given; without the sealer it is refused, and
// a store opened only to list shows it masked. A URL without any of these
// is stored as given.
func testSealedURLAtRest(t *testing.T, place func(t *testing.T) Sealed) {
	const secretURL = "https://hookuser:pa55word@hooks.example.com/path?sig=Q-SECRET-1"
	ctx := t.Context()
	b := place(t)
	s := b.Open(t, Sealer(t, SecretA))
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
	stored := b.Raw(t, "t1", "secret")
	for _, secret := range []string{"pa55word", "hookuser", "Q-SECRET-1", "sig="} {
		if bytes.Contains(stored, []byte(secret)) {
			t.Errorf("the stored config holds %q: %s", secret, stored)
		}
	}
	if !bytes.Contains(stored, []byte("https://***@hooks.example.com/path?***")) {
		t.Errorf("the stored config does not show its masked URL: %s", stored)
	}
	if frag := b.Raw(t, "t1", "fragment"); bytes.Contains(frag, []byte("frag-SECRET")) {
		t.Errorf("the stored config holds its fragment: %s", frag)
	}
	if plain := b.Raw(t, "t1", "plain"); !bytes.Contains(plain, []byte(`"https://hooks.example.com/plain"`)) {
		t.Errorf("a URL with nothing to hide was not stored as given: %s", plain)
	}

	s = b.Open(t, nil)
	if _, err := s.GetPushConfig(ctx, alice, "t1", "secret"); !errors.Is(err, tasks.ErrUnsealable) {
		t.Fatalf("get without a sealer: %v, want ErrUnsealable", err)
	}

	s = b.Open(t, tasks.ListingSealer())
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
}
