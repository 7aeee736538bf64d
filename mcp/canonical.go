package mcp

import (
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/handoff-a2a/handoff/internal/jcs"
)

// appendCanonicalContent appends the canonical JSON of a tool's content list. Text blocks,
// the common case, are written directly; other blocks are written as encoding/json would
// send them.
func appendCanonicalContent(dst []byte, content []mcpsdk.Content) ([]byte, error) {
	if content == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	for i, block := range content {
		if i > 0 {
			dst = append(dst, ',')
		}
		if t, ok := block.(*mcpsdk.TextContent); ok && t.Meta == nil && t.Annotations == nil {
			dst = append(dst, `{"text":`...)
			dst = jcs.AppendString(dst, jcs.ValidUTF8(t.Text))
			dst = append(dst, `,"type":"text"}`...)
			continue
		}
		var err error
		if dst, err = jcs.Append(dst, block); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}
