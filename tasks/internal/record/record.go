package record

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// Task is a task snapshot as both stores keep it: its JSON is
// byte for byte json.Marshal(Task), whichever writer made it.
type Task struct {
	// Owner, Version and Updated are the snapshot's (see [tasks.Snapshot]).
	Owner   tasks.Owner `json:"owner"`
	Version uint64      `json:"version"`
	Updated time.Time   `json:"updated"`
	// Task is the task as of Version.
	Task *a2a.Task `json:"task"`
}

// OwnerKey encodes an owner so that no principal or tenant can be a prefix
// of another's key.
func OwnerKey(o tasks.Owner) []byte {
	b := binary.AppendUvarint(nil, uint64(len(o.Principal)))
	b = append(b, o.Principal...)
	b = binary.AppendUvarint(b, uint64(len(o.Tenant)))
	return append(b, o.Tenant...)
}

// Decode decodes the stored record of task id and checks it is whole: a
// record that does not decode, or is another task's, is [tasks.ErrCorrupt].
func Decode(id a2a.TaskID, b []byte) (*tasks.Snapshot, error) {
	r, err := decodeRecord(b)
	if err != nil {
		return nil, fmt.Errorf("decode task %s: %w: %v", id, tasks.ErrCorrupt, err)
	}
	if r.Task == nil || r.Task.ID != id {
		return nil, fmt.Errorf("decode task %s: %w: id does not match", id, tasks.ErrCorrupt)
	}
	return &tasks.Snapshot{Task: r.Task, Owner: r.Owner, Version: r.Version, Updated: r.Updated}, nil
}

// The types below read a stored task record in one pass of encoding/json.
// Decoding into a2a-go's types scans each message part five times or more:
// ContentParts, Part, MessageRole and TaskState have UnmarshalJSON methods,
// and encoding/json skips over each value before handing it to one, which
// validates and decodes it again. These mirror the JSON a2a-go's types read,
// with the same names and the same rules applied afterwards (one content per
// part, the *_UNSPECIFIED names meaning empty); the tests and
// FuzzDecodeTaskRecord compare them with a2a-go's own decoding.

type recordJSON struct {
	Owner   tasks.Owner `json:"owner"`
	Version uint64      `json:"version"`
	Updated time.Time   `json:"updated"`
	Task    *taskJSON   `json:"task"`
}

type taskJSON struct {
	ID        a2a.TaskID      `json:"id"`
	Artifacts []*artifactJSON `json:"artifacts"`
	ContextID string          `json:"contextId"`
	History   []*messageJSON  `json:"history"`
	Metadata  map[string]any  `json:"metadata"`
	Status    statusJSON      `json:"status"`
}

type statusJSON struct {
	Message   *messageJSON `json:"message"`
	State     *string      `json:"state"`
	Timestamp *time.Time   `json:"timestamp"`
}

type messageJSON struct {
	ID             string         `json:"messageId"`
	ContextID      string         `json:"contextId"`
	Extensions     []string       `json:"extensions"`
	Metadata       map[string]any `json:"metadata"`
	Parts          []*partJSON    `json:"parts"`
	ReferenceTasks []a2a.TaskID   `json:"referenceTaskIds"`
	Role           *string        `json:"role"`
	TaskID         a2a.TaskID     `json:"taskId"`
}

type artifactJSON struct {
	ID          a2a.ArtifactID `json:"artifactId"`
	Description string         `json:"description"`
	Extensions  []string       `json:"extensions"`
	Metadata    map[string]any `json:"metadata"`
	Name        string         `json:"name"`
	Parts       []*partJSON    `json:"parts"`
}

type partJSON struct {
	Text      *string        `json:"text"`
	Raw       *[]byte        `json:"raw"`
	Data      *any           `json:"data"`
	URL       *string        `json:"url"`
	Filename  string         `json:"filename"`
	MediaType string         `json:"mediaType"`
	Metadata  map[string]any `json:"metadata"`
}

// decodeRecord reads a task record as json.Unmarshal into Task does.
func decodeRecord(b []byte) (*Task, error) {
	var r recordJSON
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	out := &Task{Owner: r.Owner, Version: r.Version, Updated: r.Updated}
	if r.Task == nil {
		return out, nil
	}
	t := r.Task
	task := &a2a.Task{ID: t.ID, ContextID: t.ContextID, Metadata: t.Metadata}
	var err error
	if t.Artifacts != nil {
		task.Artifacts = make([]*a2a.Artifact, len(t.Artifacts))
		for i, a := range t.Artifacts {
			if task.Artifacts[i], err = a.artifact(); err != nil {
				return nil, err
			}
		}
	}
	if t.History != nil {
		task.History = make([]*a2a.Message, len(t.History))
		for i, m := range t.History {
			if task.History[i], err = m.message(); err != nil {
				return nil, err
			}
		}
	}
	if task.Status.Message, err = t.Status.Message.message(); err != nil {
		return nil, err
	}
	if t.Status.State != nil && *t.Status.State != "TASK_STATE_UNSPECIFIED" {
		task.Status.State = a2a.TaskState(*t.Status.State)
	}
	task.Status.Timestamp = t.Status.Timestamp
	out.Task = task
	return out, nil
}

func (m *messageJSON) message() (*a2a.Message, error) {
	if m == nil {
		return nil, nil
	}
	parts, err := contentParts(m.Parts)
	if err != nil {
		return nil, err
	}
	out := &a2a.Message{ID: m.ID, ContextID: m.ContextID, Extensions: m.Extensions, Metadata: m.Metadata,
		Parts: parts, ReferenceTasks: m.ReferenceTasks, TaskID: m.TaskID}
	if m.Role != nil && *m.Role != "ROLE_UNSPECIFIED" {
		out.Role = a2a.MessageRole(*m.Role)
	}
	return out, nil
}

func (a *artifactJSON) artifact() (*a2a.Artifact, error) {
	if a == nil {
		return nil, nil
	}
	parts, err := contentParts(a.Parts)
	if err != nil {
		return nil, err
	}
	return &a2a.Artifact{ID: a.ID, Description: a.Description, Extensions: a.Extensions, Metadata: a.Metadata,
		Name: a.Name, Parts: parts}, nil
}

func contentParts(ps []*partJSON) (a2a.ContentParts, error) {
	if ps == nil {
		return nil, nil
	}
	out := make(a2a.ContentParts, len(ps))
	for i, p := range ps {
		if p == nil {
			continue
		}
		part := &a2a.Part{Filename: p.Filename, MediaType: p.MediaType, Metadata: p.Metadata}
		n := 0
		if p.Text != nil {
			part.Content = a2a.Text(*p.Text)
			n++
		}
		if p.Raw != nil {
			part.Content = a2a.Raw(*p.Raw)
			n++
		}
		if p.Data != nil {
			part.Content = a2a.Data{Value: *p.Data}
			n++
		}
		if p.URL != nil && *p.URL != "" {
			part.Content = a2a.URL(*p.URL)
			n++
		}
		if n != 1 {
			return nil, fmt.Errorf("part %d has %d contents, want one of text, raw, data or url", i, n)
		}
		out[i] = part
	}
	return out, nil
}
