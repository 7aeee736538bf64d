package redisstore

import (
	"encoding/json"
	neturl "net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/redis/go-redis/v9"
)

// FuzzStoreURL: whatever URL a config holds, reading it never panics, an
// accepted one names at least one address, and no error echoes a password.
func FuzzStoreURL(f *testing.F) {
	for _, s := range []string{
		"redis://127.0.0.1:6379/0",
		"rediss://user:secret@host:6380/2?dial_timeout=3s",
		"unix:///tmp/redis.sock?db=1",
		"redis://s1:26379/0?master_name=mymaster&addr=s2:26379",
		"redis://n1:6379?addr=n2:6379&addr=n3:6379",
		"redis://:secret@n1:6379?addr=n2:6379&master_name=",
		"redis://h:notaport/x?addr=&master_name=m",
		"http://h:1", "", "redis://[::1", "redis://h/99999999999999999999",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, url string) {
		o, _, err := universalOptions(url)
		if err != nil {
			if u, perr := neturl.Parse(url); perr == nil {
				if p, ok := u.User.Password(); ok && len(p) >= 4 && strings.Contains(err.Error(), p) {
					t.Fatalf("error %q echoes the URL's password", err)
				}
			}
			return
		}
		if len(o.Addrs) == 0 {
			t.Fatalf("accepted %q without an address", url)
		}
	})
}

// FuzzDecodeEntries: a Stream entry read back from Redis never panics the
// decoder, and an accepted event encodes and decodes to itself again.
func FuzzDecodeEntries(f *testing.F) {
	task := &a2a.Task{ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	for _, ev := range []a2a.Event{task, a2a.NewStatusUpdateEvent(task, a2a.TaskStateCompleted, nil), a2a.NewArtifactEvent(task, a2a.NewTextPart("x"))} {
		b, _ := json.Marshal(a2a.StreamResponse{Event: ev})
		f.Add("0-1", string(b))
	}
	f.Add("0-x", "{}")
	f.Add("1-1", `{"task":{}}`)
	f.Add("0-18446744073709551615", "{")
	f.Fuzz(func(t *testing.T, id, value string) {
		evs, err := decodeEntries("t", []redis.XMessage{{ID: id, Values: map[string]any{"e": value}}})
		if err != nil {
			return
		}
		b, err := json.Marshal(a2a.StreamResponse{Event: evs[0].Event})
		if err != nil {
			t.Fatalf("accepted event does not encode: %v", err)
		}
		again, err := decodeEntries("t", []redis.XMessage{{ID: id, Values: map[string]any{"e": string(b)}}})
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		b2, _ := json.Marshal(a2a.StreamResponse{Event: again[0].Event})
		if !reflect.DeepEqual(b, b2) || again[0].Seq != evs[0].Seq {
			t.Fatalf("event changed in a round trip:\n%s\n%s", b, b2)
		}
	})
}
