package tasks

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// The appenders below write a2a-go values exactly as encoding/json writes
// them through a2a-go's marshalers, byte for byte (the tests compare), into
// one buffer. a2a-go's MarshalJSON methods (StreamResponse, ContentParts,
// Part, TaskState, MessageRole) each call json.Marshal on a wrapper, and
// encoding/json copies and re-validates what every one of them returns: that
// was most of the store's allocations per event. Metadata and data parts,
// free-form values, still go through json.Marshal.

// AppendStreamResponse appends ev as json.Marshal(a2a.StreamResponse{Event: ev})
// writes it, for transports that answer with the same JSON the store keeps.
func AppendStreamResponse(b []byte, ev a2a.Event) ([]byte, error) {
	return appendEvent(b, ev)
}

// AppendTask appends t as json.Marshal(t) writes it.
func AppendTask(b []byte, t *a2a.Task) ([]byte, error) {
	if t == nil {
		return append(b, "null"...), nil
	}
	return appendTask(b, t, nil, nil)
}

// appendEvent appends ev in its a2a.StreamResponse form.
func appendEvent(b []byte, ev a2a.Event) ([]byte, error) {
	var err error
	switch e := ev.(type) {
	case *a2a.Task:
		if e == nil {
			break
		}
		b = append(b, `{"task":`...)
		if b, err = appendTask(b, e, nil, nil); err != nil {
			return nil, err
		}
		return append(b, '}'), nil
	case *a2a.Message:
		if e == nil {
			break
		}
		b = append(b, `{"message":`...)
		if b, err = appendMessage(b, e); err != nil {
			return nil, err
		}
		return append(b, '}'), nil
	case *a2a.TaskStatusUpdateEvent:
		if e == nil {
			break
		}
		b = append(b, `{"statusUpdate":{"contextId":`...)
		b = appendString(b, e.ContextID)
		b = append(b, `,"status":`...)
		if b, err = appendStatus(b, &e.Status); err != nil {
			return nil, err
		}
		b = append(b, `,"taskId":`...)
		b = appendString(b, string(e.TaskID))
		if b, err = appendMeta(b, e.Metadata); err != nil {
			return nil, err
		}
		return append(b, "}}"...), nil
	case *a2a.TaskArtifactUpdateEvent:
		if e == nil {
			break
		}
		b, _, _, err = appendArtifactUpdate(b, e)
		return b, err
	}
	// Unknown and nil events: whatever a2a-go makes of them, error included.
	j, err := json.Marshal(a2a.StreamResponse{Event: ev})
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}

// appendArtifactUpdate appends e, not nil, in its a2a.StreamResponse form,
// and tells where in b its artifact starts and ends.
func appendArtifactUpdate(b []byte, e *a2a.TaskArtifactUpdateEvent) (_ []byte, start, end int, _ error) {
	var err error
	b = append(b, `{"artifactUpdate":{`...)
	if e.Append {
		b = append(b, `"append":true,`...)
	}
	b = append(b, `"artifact":`...)
	start = len(b)
	if b, err = appendArtifact(b, e.Artifact); err != nil {
		return nil, 0, 0, err
	}
	end = len(b)
	b = append(b, `,"contextId":`...)
	b = appendString(b, e.ContextID)
	if e.LastChunk {
		b = append(b, `,"lastChunk":true`...)
	}
	b = append(b, `,"taskId":`...)
	b = appendString(b, string(e.TaskID))
	if b, err = appendMeta(b, e.Metadata); err != nil {
		return nil, 0, 0, err
	}
	return append(b, "}}"...), start, end, nil
}

// appendTask appends t. artifacts and history, when not nil, are the
// already encoded t.Artifacts and t.History, one entry each.
func appendTask(b []byte, t *a2a.Task, artifacts []encodedPart[a2a.Artifact], history []encodedPart[a2a.Message]) ([]byte, error) {
	var err error
	b = append(b, `{"id":`...)
	b = appendString(b, string(t.ID))
	if len(t.Artifacts) > 0 {
		b = append(b, `,"artifacts":[`...)
		for i, a := range t.Artifacts {
			if i > 0 {
				b = append(b, ',')
			}
			if artifacts != nil {
				b = append(b, artifacts[i].json...)
			} else if b, err = appendArtifact(b, a); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = append(b, `,"contextId":`...)
	b = appendString(b, t.ContextID)
	if len(t.History) > 0 {
		b = append(b, `,"history":[`...)
		for i, m := range t.History {
			if i > 0 {
				b = append(b, ',')
			}
			if history != nil {
				b = append(b, history[i].json...)
			} else if b, err = appendMessage(b, m); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if b, err = appendMeta(b, t.Metadata); err != nil {
		return nil, err
	}
	b = append(b, `,"status":`...)
	if b, err = appendStatus(b, &t.Status); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

func appendStatus(b []byte, s *a2a.TaskStatus) ([]byte, error) {
	b = append(b, '{')
	if s.Message != nil {
		var err error
		b = append(b, `"message":`...)
		if b, err = appendMessage(b, s.Message); err != nil {
			return nil, err
		}
		b = append(b, ',')
	}
	b = append(b, `"state":`...)
	b = appendString(b, s.State.String())
	if s.Timestamp != nil {
		var err error
		b = append(b, `,"timestamp":`...)
		if b, err = appendTime(b, *s.Timestamp); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendMessage(b []byte, m *a2a.Message) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	var err error
	b = append(b, `{"messageId":`...)
	b = appendString(b, m.ID)
	if m.ContextID != "" {
		b = append(b, `,"contextId":`...)
		b = appendString(b, m.ContextID)
	}
	b = appendStrings(b, "extensions", m.Extensions)
	if b, err = appendMeta(b, m.Metadata); err != nil {
		return nil, err
	}
	b = append(b, `,"parts":`...)
	if b, err = appendParts(b, m.Parts); err != nil {
		return nil, err
	}
	if len(m.ReferenceTasks) > 0 {
		b = append(b, `,"referenceTaskIds":[`...)
		for i, id := range m.ReferenceTasks {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, string(id))
		}
		b = append(b, ']')
	}
	b = append(b, `,"role":`...)
	b = appendString(b, m.Role.String())
	if m.TaskID != "" {
		b = append(b, `,"taskId":`...)
		b = appendString(b, string(m.TaskID))
	}
	return append(b, '}'), nil
}

func appendArtifact(b []byte, a *a2a.Artifact) ([]byte, error) {
	if a == nil {
		return append(b, "null"...), nil
	}
	var err error
	b = append(b, `{"artifactId":`...)
	b = appendString(b, string(a.ID))
	if a.Description != "" {
		b = append(b, `,"description":`...)
		b = appendString(b, a.Description)
	}
	b = appendStrings(b, "extensions", a.Extensions)
	if b, err = appendMeta(b, a.Metadata); err != nil {
		return nil, err
	}
	if a.Name != "" {
		b = append(b, `,"name":`...)
		b = appendString(b, a.Name)
	}
	b = append(b, `,"parts":`...)
	if b, err = appendParts(b, a.Parts); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

func appendParts(b []byte, parts a2a.ContentParts) ([]byte, error) {
	if parts == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i, p := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendPart(b, p); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// appendPart writes a part flattened as a2a.Part.MarshalJSON does: one of
// text, raw, data or url, then filename, mediaType and metadata.
func appendPart(b []byte, p *a2a.Part) ([]byte, error) {
	if p == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '{')
	switch c := p.Content.(type) {
	case a2a.Text:
		b = append(b, `"text":`...)
		b = appendString(b, string(c))
	case a2a.Raw:
		b = append(b, `"raw":`...)
		if c == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, c)
			b = append(b, '"')
		}
	case a2a.Data:
		j, err := json.Marshal(c.Value)
		if err != nil {
			return nil, fmt.Errorf("encode data part: %w", err)
		}
		b = append(b, `"data":`...)
		b = append(b, j...)
	case a2a.URL:
		if c != "" {
			b = append(b, `"url":`...)
			b = appendString(b, string(c))
		}
	}
	if p.Filename != "" {
		b = appendSep(b)
		b = append(b, `"filename":`...)
		b = appendString(b, p.Filename)
	}
	if p.MediaType != "" {
		b = appendSep(b)
		b = append(b, `"mediaType":`...)
		b = appendString(b, p.MediaType)
	}
	if len(p.Metadata) > 0 {
		j, err := json.Marshal(p.Metadata)
		if err != nil {
			return nil, fmt.Errorf("encode part metadata: %w", err)
		}
		b = appendSep(b)
		b = append(b, `"metadata":`...)
		b = append(b, j...)
	}
	return append(b, '}'), nil
}

// appendSep writes the comma before a member unless the object just opened.
func appendSep(b []byte) []byte {
	if b[len(b)-1] == '{' {
		return b
	}
	return append(b, ',')
}

// appendMeta appends `,"metadata":{...}` unless m is empty.
func appendMeta(b []byte, m map[string]any) ([]byte, error) {
	if len(m) == 0 {
		return b, nil
	}
	b = append(b, `,"metadata":`...)
	b, err := appendAny(b, m)
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	return b, nil
}

// appendAny writes v as json.Marshal does. Strings, booleans, null and
// objects, the usual metadata, are written here: json.Marshal of a map took
// a tenth of the CPU of storing an event, most of it growing the writer's
// stack. Other values go to json.Marshal.
func appendAny(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case map[string]any:
		if v == nil {
			return append(b, "null"...), nil
		}
		var arr [16]string
		keys := arr[:0]
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // json.Marshal orders an object's keys
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendString(b, k), ':')
			var err error
			if b, err = appendAny(b, v[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}

// appendStrings appends `,"name":[...]` unless ss is empty.
func appendStrings(b []byte, name string, ss []string) []byte {
	if len(ss) == 0 {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":[`...)
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendTime writes t as time.Time.MarshalJSON does, refusing what it refuses.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	n0 := len(b)
	b = t.AppendFormat(b, time.RFC3339Nano)
	if b[n0+len("9999")] != '-' {
		return nil, errors.New("encode time: year outside of range [0,9999]")
	}
	if b[len(b)-1] != 'Z' {
		c := b[len(b)-len("Z07:00")]
		if ('0' <= c && c <= '9') || 10*(b[len(b)-5]-'0')+(b[len(b)-4]-'0') >= 24 {
			return nil, errors.New("encode time: timezone hour outside of range [0,23]")
		}
	}
	return append(b, '"'), nil
}

// appendString writes s as encoding/json does by default: HTML characters,
// U+2028 and U+2029 escaped, invalid UTF-8 replaced by U+FFFD.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
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
	Owner   Owner     `json:"owner"`
	Version uint64    `json:"version"`
	Updated time.Time `json:"updated"`
	Task    *taskJSON `json:"task"`
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

// decodeRecord reads a task record as json.Unmarshal into taskRecord does.
func decodeRecord(b []byte) (*taskRecord, error) {
	var r recordJSON
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	out := &taskRecord{Owner: r.Owner, Version: r.Version, Updated: r.Updated}
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
