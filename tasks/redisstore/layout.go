package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/internal/record"
)

// A task is stored in three parts so that an append writes only what it
// adds: the hash field "head" holds the snapshot without its history and
// without its artifacts' parts (a record.Task, so record.Decode reads it),
// the list "hist:<id>" holds the history entries, one JSON message each,
// and the list "parts:<id>" the artifacts' parts, each "<artifact index>
// <part JSON>". Tasks written before this layout keep their whole snapshot
// in the hash field "record"; they read as they are and move to the new
// layout at their next append.

func (s *Store) histKey(id a2a.TaskID) string  { return s.prefix + "hist:" + string(id) }
func (s *Store) partsKey(id a2a.TaskID) string { return s.prefix + "parts:" + string(id) }

// encodeHead encodes the snapshot without the history and the parts.
func encodeHead(next *tasks.Snapshot) ([]byte, error) {
	t := *next.Task
	t.History = nil
	if len(t.Artifacts) > 0 {
		arts := make([]*a2a.Artifact, len(t.Artifacts))
		for i, a := range t.Artifacts {
			c := *a
			c.Parts = nil
			arts[i] = &c
		}
		t.Artifacts = arts
	}
	return json.Marshal(record.Task{Owner: next.Owner, Version: next.Version, Updated: next.Updated, Task: &t})
}

// tail is what an append adds to a task's lists.
type tail struct {
	full    bool  // rewrite both lists whole
	hist    []any // history entries, the newest histN of the task's
	parts   []any // parts entries
	newArts int   // artifacts the events add
	nparts  int   // the task's parts in all
}

// appendTail works out from the events what they added to the snapshot
// (tasks.Apply only ever appends to the history, adds artifacts and extends
// their parts); anything else, or a first write, rewrites the lists whole.
// The script checks the result against the stored counts and asks for a
// whole rewrite when they do not add up.
func appendTail(next *tasks.Snapshot, events []a2a.Event, full bool) (tail, error) {
	t := next.Task
	tl := tail{full: full || len(events) == 0} // no events: the snapshot alone is replaced
	for _, a := range t.Artifacts {
		tl.nparts += len(a.Parts)
	}
	histN := 0
	added := map[int]int{} // artifact index → parts added
	for _, ev := range events {
		if tl.full {
			break
		}
		switch e := ev.(type) {
		case *a2a.TaskStatusUpdateEvent:
			histN++ // at most one: the previous status message
		case *a2a.TaskArtifactUpdateEvent:
			i := -1
			if e.Artifact != nil {
				i = slices.IndexFunc(t.Artifacts, func(a *a2a.Artifact) bool { return a.ID == e.Artifact.ID })
			}
			if i < 0 {
				tl.full = true
				break
			}
			if !e.Append {
				tl.newArts++
			}
			added[i] += len(e.Artifact.Parts)
		default:
			tl.full = true
		}
	}
	if tl.full {
		histN = len(t.History)
		clear(added)
		for i, a := range t.Artifacts {
			added[i] = len(a.Parts)
		}
	}
	if !tl.full {
		histN++ // one entry the list should hold already, which the script compares
	}
	histN = min(histN, len(t.History))
	for _, m := range t.History[len(t.History)-histN:] {
		b, err := json.Marshal(m)
		if err != nil {
			return tail{}, fmt.Errorf("encode history: %w", err)
		}
		tl.hist = append(tl.hist, b)
	}
	for i, a := range t.Artifacts {
		n := added[i]
		if n > len(a.Parts) {
			return appendTail(next, events, true)
		}
		prefix := strconv.Itoa(i) + " "
		for _, p := range a.Parts[len(a.Parts)-n:] {
			b, err := json.Marshal(p)
			if err != nil {
				return tail{}, fmt.Errorf("encode artifact part: %w", err)
			}
			tl.parts = append(tl.parts, prefix+string(b))
		}
	}
	return tl, nil
}

// readScript reads tasks in one call that nothing can fall between: an
// append cannot land between a task's head and its lists. It is flagged
// no-writes so that a full server (maxmemory) and a replica still serve it,
// which MULTI would not on a full one.
//
// KEYS: per task its hash, history list and parts list. ARGV: the history
// wanted (-1: all, 0: none, n: the newest n), the artifacts wanted ("1" or
// "0"). It answers per task {head, record, history entries, parts entries}.
var readScript = redis.NewScript(`#!lua flags=no-writes
local h = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS, 3 do
	local f = redis.call('HMGET', KEYS[i], 'head', 'record')
	local hist, parts = {}, {}
	if f[1] then
		if h < 0 then
			hist = redis.call('LRANGE', KEYS[i + 1], 0, -1)
		elseif h > 0 then
			hist = redis.call('LRANGE', KEYS[i + 1], -h, -1)
		end
		if ARGV[2] == '1' then parts = redis.call('LRANGE', KEYS[i + 2], 0, -1) end
	end
	table.insert(out, {f[1], f[2], hist, parts})
end
return out
`)

// taskRead is what readScript answered of one task.
type taskRead struct {
	head, old   string // old: the record of the layout before this one
	hist, parts []any
}

// readTasks reads tasks with history entries as readScript's ARGV says
// (history < 0: all of them) and, with artifacts, their artifacts.
func (s *Store) readTasks(ctx, c context.Context, ids []a2a.TaskID, history int, artifacts bool) ([]taskRead, error) {
	keys := make([]string, 0, 3*len(ids))
	for _, id := range ids {
		keys = append(keys, s.taskKey(id), s.histKey(id), s.partsKey(id))
	}
	arts := "0"
	if artifacts {
		arts = "1"
	}
	v, err := readScript.Run(c, s.rdb, keys, history, arts).Slice()
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	if len(v) != len(ids) {
		return nil, fmt.Errorf("%w: read script answered %d tasks of %d", tasks.ErrCorrupt, len(v), len(ids))
	}
	out := make([]taskRead, len(ids))
	for i, e := range v {
		f, _ := e.([]any)
		if len(f) != 4 {
			return nil, fmt.Errorf("%w: read script answered %d values", tasks.ErrCorrupt, len(f))
		}
		out[i].head, _ = f[0].(string)
		out[i].old, _ = f[1].(string)
		out[i].hist, _ = f[2].([]any)
		out[i].parts, _ = f[3].([]any)
	}
	return out, nil
}

// snapshot assembles a queued read; tasks.ErrNotFound when the task is not
// stored.
func (r taskRead) snapshot(id a2a.TaskID, history int, artifacts bool) (*tasks.Snapshot, error) {
	if r.head == "" {
		if r.old == "" {
			return nil, tasks.ErrNotFound
		}
		snap, err := record.Decode(id, []byte(r.old))
		if err != nil {
			return nil, err
		}
		if history >= 0 && len(snap.Task.History) > history {
			snap.Task.History = snap.Task.History[len(snap.Task.History)-history:]
		}
		if !artifacts {
			snap.Task.Artifacts = nil
		}
		return snap, nil
	}
	snap, err := record.Decode(id, []byte(r.head))
	if err != nil {
		return nil, err
	}
	t := snap.Task
	for _, e := range r.hist {
		b, _ := e.(string)
		var m a2a.Message
		if err := json.Unmarshal([]byte(b), &m); err != nil {
			return nil, fmt.Errorf("decode task %s: %w: history entry: %v", id, tasks.ErrCorrupt, err)
		}
		t.History = append(t.History, &m)
	}
	if !artifacts {
		t.Artifacts = nil
		return snap, nil
	}
	for _, v := range r.parts {
		e, _ := v.(string)
		is, pj, ok := strings.Cut(e, " ")
		i, err := strconv.Atoi(is)
		if !ok || err != nil || i < 0 || i >= len(t.Artifacts) {
			return nil, fmt.Errorf("decode task %s: %w: artifact part %.20q", id, tasks.ErrCorrupt, e)
		}
		var p a2a.Part
		if err := json.Unmarshal([]byte(pj), &p); err != nil {
			return nil, fmt.Errorf("decode task %s: %w: artifact part: %v", id, tasks.ErrCorrupt, err)
		}
		t.Artifacts[i].Parts = append(t.Artifacts[i].Parts, &p)
	}
	return snap, nil
}
