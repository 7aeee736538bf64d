package skill

import (
	"path/filepath"
	"testing"

	"github.com/handoff-a2a/handoff/internal/redistest"
)

// TestState runs one suite on both executor states: a value saved is
// loaded back (after the bbolt file is reopened, as after a restart), a
// missing key loads as nil, and a deleted one is gone.
func TestState(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (State, func() State)
	}{
		{"bolt", func(t *testing.T) (State, func() State) {
			path := filepath.Join(t.TempDir(), "state.db")
			s, err := OpenBoltState(path)
			if err != nil {
				t.Fatal(err)
			}
			reopen := func() State {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if s, err = OpenBoltState(path); err != nil {
					t.Fatal(err)
				}
				return s
			}
			t.Cleanup(func() { s.Close() })
			return s, reopen
		}},
		{"redis", func(t *testing.T) (State, func() State) {
			s, err := NewRedisState(redistest.Client(t), redistest.Namespace(t, "state"))
			if err != nil {
				t.Fatal(err)
			}
			return s, func() State { return s }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, reopen := tc.open(t)
			ctx := t.Context()
			if v, err := s.Load(ctx, "model/a"); err != nil || v != nil {
				t.Fatalf("Load of a missing key = %q, %v; want nil, nil", v, err)
			}
			if err := s.Save(ctx, "model/a", []byte(`{"turns":1}`)); err != nil {
				t.Fatal(err)
			}
			if err := s.Save(ctx, "model/a", []byte(`{"turns":2}`)); err != nil {
				t.Fatal(err)
			}
			s = reopen()
			if v, err := s.Load(ctx, "model/a"); err != nil || string(v) != `{"turns":2}` {
				t.Fatalf("Load = %q, %v; want the last value saved", v, err)
			}
			if err := s.Delete(ctx, "model/a"); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, "model/a"); err != nil {
				t.Fatalf("Delete of a missing key: %v", err)
			}
			if v, err := s.Load(ctx, "model/a"); err != nil || v != nil {
				t.Fatalf("Load after Delete = %q, %v", v, err)
			}
		})
	}
	if _, err := NewRedisState(nil, "a{b}"); err == nil {
		t.Error("a namespace with braces was accepted")
	}
}
