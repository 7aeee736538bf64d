package mcp

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// Tool is one entry of a catalog [Snapshot]. It is immutable once published.
type Tool struct {
	// Name is the catalog name, Server__Remote.
	Name string
	// Server is the configured server's name; Remote is the tool's name on that server.
	Server, Remote string
	// Definition is the tool as the server listed it. Callers must not modify it.
	Definition *mcpsdk.Tool
	// Digest is a hash of Definition; two snapshots hold the same tool when their digests match.
	Digest string
	// sum is Digest's bytes, which a relist compares without hex-encoding every listed tool.
	sum [sha256.Size]byte

	inputOnce  sync.Once
	input      *jsonschema.Resolved
	inputErr   error
	outputOnce sync.Once
	output     *jsonschema.Resolved // nil: the tool declares no output schema
	outputErr  error
}

// reuseOrNewTool namespaces def and hashes it. The hash covers the whole definition the server
// sent, so a changed description or schema is a changed tool. The tool of prev with the same
// name and digest is returned instead when there is one, so that an unchanged tool keeps its
// compiled schemas across listings.
func reuseOrNewTool(server string, def *mcpsdk.Tool, prev map[string]*Tool) (*Tool, error) {
	sum, err := toolDigest(def)
	if err != nil {
		return nil, err
	}
	name := server + nameSep + def.Name
	if t, ok := prev[name]; ok && t.sum == sum {
		return t, nil
	}
	return &Tool{
		Name:       name,
		Server:     server,
		Remote:     def.Name,
		Definition: def,
		Digest:     hex.EncodeToString(sum[:]),
		sum:        sum,
	}, nil
}

// encodeBufs holds the buffers tool digests encode into, so that a listing of thousands of
// tools does not allocate one per tool.
var encodeBufs = sync.Pool{New: func() any { return new([]byte) }}

// toolDigest hashes def's JSON, the bytes encoding/json gives (segmentio's encoder writes the
// same bytes, with HTML escaped and map keys sorted, at a fraction of the cost).
func toolDigest(def *mcpsdk.Tool) ([sha256.Size]byte, error) {
	buf := encodeBufs.Get().(*[]byte)
	defer encodeBufs.Put(buf)
	raw, err := segjson.Append((*buf)[:0], def, segjson.EscapeHTML|segjson.SortMapKeys)
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("encode tool %s: %w", def.Name, err)
	}
	*buf = raw
	return sha256.Sum256(raw), nil
}

// inputSchema compiles the tool's inputSchema once, on first use: most listed tools are never
// called.
func (t *Tool) inputSchema() (*jsonschema.Resolved, error) {
	t.inputOnce.Do(func() { t.input, t.inputErr = compileSchema(t.Definition.InputSchema) })
	return t.input, t.inputErr
}

// outputSchema compiles the tool's outputSchema once; it is nil when the tool declares none.
func (t *Tool) outputSchema() (*jsonschema.Resolved, error) {
	t.outputOnce.Do(func() {
		if t.Definition.OutputSchema != nil {
			t.output, t.outputErr = compileSchema(t.Definition.OutputSchema)
		}
	})
	return t.output, t.outputErr
}

// compileSchema turns a schema as it came over the wire (any JSON value) into a validator.
func compileSchema(v any) (*jsonschema.Resolved, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode schema: %w", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("decode schema: %w", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("resolve schema: %w", err)
	}
	return rs, nil
}

// Snapshot is one immutable version of the catalog: the tools of every available server.
type Snapshot struct {
	// Version is a hash of the tool definitions the snapshot holds (names and digests): two
	// snapshots with the same tools have the same version.
	Version string
	// Tools are sorted by Name. Callers must not modify them.
	Tools []*Tool

	byName map[string]*Tool
}

// newSnapshot sorts tools and derives the version from them.
func newSnapshot(tools []*Tool) *Snapshot {
	slices.SortFunc(tools, func(a, b *Tool) int { return cmp.Compare(a.Name, b.Name) })
	h := sha256.New()
	byName := make(map[string]*Tool, len(tools))
	for _, t := range tools {
		// The same bytes as "%s\x00%s\n", without fmt's cost per tool.
		h.Write([]byte(t.Name))
		h.Write([]byte{0})
		h.Write([]byte(t.Digest))
		h.Write([]byte{'\n'})
		byName[t.Name] = t
	}
	return &Snapshot{Version: hex.EncodeToString(h.Sum(nil)), Tools: tools, byName: byName}
}

// Tool returns the tool with the catalog name, if the snapshot holds it.
func (s *Snapshot) Tool(name string) (*Tool, bool) {
	t, ok := s.byName[name]
	return t, ok
}
