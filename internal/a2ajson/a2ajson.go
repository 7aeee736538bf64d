package a2ajson

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

// Encoded is a value with its JSON, as one of the appenders wrote it.
type Encoded[T any] struct {
	// V is the value.
	V *T
	// JSON is V's encoding, never changed once made.
	JSON []byte
}

// AppendTask appends t as json.Marshal(t) writes it.
func AppendTask(b []byte, t *a2a.Task) ([]byte, error) {
	if t == nil {
		return append(b, "null"...), nil
	}
	return AppendTaskEncoded(b, t, nil, nil)
}

// AppendStreamResponse appends ev as json.Marshal(a2a.StreamResponse{Event: ev})
// writes it, for transports that answer with the same JSON the store keeps.
func AppendStreamResponse(b []byte, ev a2a.Event) ([]byte, error) {
	var err error
	switch e := ev.(type) {
	case *a2a.Task:
		if e == nil {
			break
		}
		b = append(b, `{"task":`...)
		if b, err = AppendTaskEncoded(b, e, nil, nil); err != nil {
			return nil, err
		}
		return append(b, '}'), nil
	case *a2a.Message:
		if e == nil {
			break
		}
		b = append(b, `{"message":`...)
		if b, err = AppendMessage(b, e); err != nil {
			return nil, err
		}
		return append(b, '}'), nil
	case *a2a.TaskStatusUpdateEvent:
		if e == nil {
			break
		}
		b = append(b, `{"statusUpdate":{"contextId":`...)
		b = AppendString(b, e.ContextID)
		b = append(b, `,"status":`...)
		if b, err = appendStatus(b, &e.Status); err != nil {
			return nil, err
		}
		b = append(b, `,"taskId":`...)
		b = AppendString(b, string(e.TaskID))
		if b, err = appendMeta(b, e.Metadata); err != nil {
			return nil, err
		}
		return append(b, "}}"...), nil
	case *a2a.TaskArtifactUpdateEvent:
		if e == nil {
			break
		}
		b, _, _, err = AppendArtifactUpdate(b, e)
		return b, err
	}
	// Unknown and nil events: whatever a2a-go makes of them, error included.
	j, err := json.Marshal(a2a.StreamResponse{Event: ev})
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}

// AppendArtifactUpdate appends e, not nil, in its a2a.StreamResponse form,
// and tells where in b its artifact starts and ends.
func AppendArtifactUpdate(b []byte, e *a2a.TaskArtifactUpdateEvent) (_ []byte, start, end int, _ error) {
	var err error
	b = append(b, `{"artifactUpdate":{`...)
	if e.Append {
		b = append(b, `"append":true,`...)
	}
	b = append(b, `"artifact":`...)
	start = len(b)
	if b, err = AppendArtifact(b, e.Artifact); err != nil {
		return nil, 0, 0, err
	}
	end = len(b)
	b = append(b, `,"contextId":`...)
	b = AppendString(b, e.ContextID)
	if e.LastChunk {
		b = append(b, `,"lastChunk":true`...)
	}
	b = append(b, `,"taskId":`...)
	b = AppendString(b, string(e.TaskID))
	if b, err = appendMeta(b, e.Metadata); err != nil {
		return nil, 0, 0, err
	}
	return append(b, "}}"...), start, end, nil
}

// AppendTaskEncoded appends t. artifacts and history, when not nil, are the
// already encoded t.Artifacts and t.History, one entry each: a store that
// writes a task again after each event re-encodes only what changed.
func AppendTaskEncoded(b []byte, t *a2a.Task, artifacts []Encoded[a2a.Artifact], history []Encoded[a2a.Message]) ([]byte, error) {
	var err error
	b = append(b, `{"id":`...)
	b = AppendString(b, string(t.ID))
	if len(t.Artifacts) > 0 {
		b = append(b, `,"artifacts":[`...)
		for i, a := range t.Artifacts {
			if i > 0 {
				b = append(b, ',')
			}
			if artifacts != nil {
				b = append(b, artifacts[i].JSON...)
			} else if b, err = AppendArtifact(b, a); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = append(b, `,"contextId":`...)
	b = AppendString(b, t.ContextID)
	if len(t.History) > 0 {
		b = append(b, `,"history":[`...)
		for i, m := range t.History {
			if i > 0 {
				b = append(b, ',')
			}
			if history != nil {
				b = append(b, history[i].JSON...)
			} else if b, err = AppendMessage(b, m); err != nil {
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
		if b, err = AppendMessage(b, s.Message); err != nil {
			return nil, err
		}
		b = append(b, ',')
	}
	b = append(b, `"state":`...)
	b = AppendString(b, s.State.String())
	if s.Timestamp != nil {
		var err error
		b = append(b, `,"timestamp":`...)
		if b, err = AppendTime(b, *s.Timestamp); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// AppendMessage appends m as json.Marshal(m) writes it.
func AppendMessage(b []byte, m *a2a.Message) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	var err error
	b = append(b, `{"messageId":`...)
	b = AppendString(b, m.ID)
	if m.ContextID != "" {
		b = append(b, `,"contextId":`...)
		b = AppendString(b, m.ContextID)
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
			b = AppendString(b, string(id))
		}
		b = append(b, ']')
	}
	b = append(b, `,"role":`...)
	b = AppendString(b, m.Role.String())
	if m.TaskID != "" {
		b = append(b, `,"taskId":`...)
		b = AppendString(b, string(m.TaskID))
	}
	return append(b, '}'), nil
}

// AppendArtifact appends a as json.Marshal(a) writes it.
func AppendArtifact(b []byte, a *a2a.Artifact) ([]byte, error) {
	if a == nil {
		return append(b, "null"...), nil
	}
	var err error
	b = append(b, `{"artifactId":`...)
	b = AppendString(b, string(a.ID))
	if a.Description != "" {
		b = append(b, `,"description":`...)
		b = AppendString(b, a.Description)
	}
	b = appendStrings(b, "extensions", a.Extensions)
	if b, err = appendMeta(b, a.Metadata); err != nil {
		return nil, err
	}
	if a.Name != "" {
		b = append(b, `,"name":`...)
		b = AppendString(b, a.Name)
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
		b = AppendString(b, string(c))
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
			b = AppendString(b, string(c))
		}
	}
	if p.Filename != "" {
		b = appendSep(b)
		b = append(b, `"filename":`...)
		b = AppendString(b, p.Filename)
	}
	if p.MediaType != "" {
		b = appendSep(b)
		b = append(b, `"mediaType":`...)
		b = AppendString(b, p.MediaType)
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
		return AppendString(b, v), nil
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
			b = append(AppendString(b, k), ':')
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
		b = AppendString(b, s)
	}
	return append(b, ']')
}

// AppendTime writes t as time.Time.MarshalJSON does, refusing what it refuses.
func AppendTime(b []byte, t time.Time) ([]byte, error) {
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

// AppendString writes s as encoding/json does by default: HTML characters,
// U+2028 and U+2029 escaped, invalid UTF-8 replaced by U+FFFD.
func AppendString(b []byte, s string) []byte {
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
