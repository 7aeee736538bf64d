package record

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// hasDuplicateKeys reports whether an object in b repeats a member name, as
// encoding/json matches names (case-insensitively), or has a non-ASCII name.
// There decodeRecord and a2a-go's own decoding may differ: a repeated list
// is decoded into the first one's elements by encoding/json, but replaced
// by a2a-go's UnmarshalJSON. The store never writes such records.
func hasDuplicateKeys(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	type level struct {
		object bool
		keys   []string
		key    bool // the next string token is a member name
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			name, _ := tok.(string)
			for _, r := range name {
				if r >= utf8.RuneSelf {
					return true
				}
			}
			for _, k := range top.keys {
				if strings.EqualFold(k, name) {
					return true
				}
			}
			top.keys = append(top.keys, name)
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{object: true, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &level{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true // a value ended: a name comes next
		}
	}
}

// seedTasks are tasks with every member a record holds, and the values
// where encoding/json has its own rules: HTML characters, U+2028, invalid
// UTF-8, control characters, nil and empty lists, zones.
func seedTasks() []*a2a.Task {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", -(5*3600+30*60)))
	msg := &a2a.Message{ID: "m<1>", ContextID: "c&", Extensions: []string{"e1", "e2"}, Metadata: map[string]any{"k": []any{1.5, "<"}},
		Parts: a2a.ContentParts{
			a2a.NewTextPart("a\"b\\c\n\r\t\b\f\x01\x1f\x7f <>& \u2028\u2029 é 😀 \xff\xfe end"),
			a2a.NewRawPart([]byte{0, 1, 2, 250}),
			{Content: a2a.Raw(nil)},
			a2a.NewDataPart(map[string]any{"z": 1.0, "a": []any{nil, true}}),
			a2a.NewDataPart(nil),
			a2a.NewFileURLPart("https://x.example/f?a=1&b=2", "image/png"),
			{Content: a2a.URL(""), Filename: "f.txt"},
			{Filename: "only.txt", MediaType: "text/plain", Metadata: map[string]any{"m": "v"}},
			{},
			nil,
		},
		ReferenceTasks: []a2a.TaskID{"t0", "t<"}, Role: a2a.MessageRoleAgent, TaskID: "t1"}
	bare := &a2a.Message{ID: "m2", Parts: a2a.ContentParts{}}
	art := &a2a.Artifact{ID: "a1", Description: "d", Extensions: []string{"x"}, Metadata: map[string]any{"contextId": "c"}, Name: "n",
		Parts: a2a.ContentParts{a2a.NewTextPart("x")}}
	return []*a2a.Task{
		{ID: "t1", ContextID: "c1", Metadata: map[string]any{"n": 2.0},
			History: []*a2a.Message{msg, bare, nil}, Artifacts: []*a2a.Artifact{art, nil, {ID: "a2"}},
			Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Message: bare, Timestamp: &ts}},
		{ID: "t1", ContextID: "c1", History: []*a2a.Message{}, Artifacts: []*a2a.Artifact{}},
	}
}

// FuzzDecodeRecord checks decodeRecord against json.Unmarshal into
// Task, a2a-go's own decoding: an error from both, or equal records.
func FuzzDecodeRecord(f *testing.F) {
	for _, task := range seedTasks() {
		b, _ := json.Marshal(Task{Owner: tasks.Owner{Principal: "p", Tenant: "t"}, Version: 2, Updated: time.Unix(5, 0), Task: task})
		f.Add(b)
	}
	f.Add([]byte(`{"task":{"id":"t1","status":{"state":"TASK_STATE_UNSPECIFIED","message":{"role":"ROLE_UNSPECIFIED","parts":[{"url":"","text":"x"}]}}}}`))
	f.Add([]byte(`{"task":{"id":"t1","history":[{"parts":[{"data":null}]}]}}`))
	f.Add([]byte(`{"task":{"id":"t1","artifacts":[{"parts":[{"raw":"AA==","text":"x"}]},null]}}`))
	f.Add([]byte(`{"task":null,"version":-1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if hasDuplicateKeys(b) {
			return
		}
		var want Task
		wantErr := json.Unmarshal(b, &want)
		got, err := decodeRecord(b)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("decodeRecord error %v, json.Unmarshal error %v", err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(*got, want) {
			t.Fatalf("decodeRecord:\n got %#v\nwant %#v", *got, want)
		}
	})
}

// BenchmarkDecodeRecord compares, in one run, decodeRecord with decoding
// into a2a-go's types, on a completed task with a 1 KiB message.
func BenchmarkDecodeRecord(b *testing.B) {
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted},
		History: []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(strings.Repeat("x", 1024)))}}
	rec, err := json.Marshal(Task{Owner: tasks.Owner{Principal: "p"}, Version: 2, Updated: time.Now(), Task: task})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("a2a-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r Task
			if err := json.Unmarshal(rec, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decodeRecord", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeRecord(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzDecodeTaskRecord feeds the store's decode path arbitrary bytes: it must
// never panic, and whatever it accepts must survive a re-encode.
func FuzzDecodeTaskRecord(f *testing.F) {
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted},
		History:   []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))},
		Artifacts: []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{a2a.NewDataPart(map[string]any{"k": 1.0})}}}}
	good, _ := json.Marshal(Task{Owner: tasks.Owner{Principal: "p"}, Version: 3, Updated: time.Unix(1, 0), Task: task})
	f.Add(good)
	f.Add([]byte(`{"task":{"id":"t1"}}`))
	f.Add([]byte(`{"task":null}`))
	f.Add([]byte(`{"task":{"id":"t1","status":{"state":"TASK_STATE_WORKING"},"history":[{"parts":[{"raw":"AA=="}]}]}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		snap, err := Decode("t1", b)
		if err != nil {
			return
		}
		again, err := json.Marshal(Task{Owner: snap.Owner, Version: snap.Version, Updated: snap.Updated, Task: snap.Task})
		if err != nil {
			t.Fatalf("accepted record does not re-encode: %v", err)
		}
		if _, err := Decode("t1", again); err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
	})
}
