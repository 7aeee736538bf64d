package mcp

import (
	"crypto/sha256"
	"encoding/json"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolDigestIsEncodingJSONs holds the digest to the bytes encoding/json gives, which
// snapshot versions were computed from before: a changed encoding would change every version.
func TestToolDigestIsEncodingJSONs(t *testing.T) {
	yes := true
	var schema map[string]any
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{"z":{"type":"string","description":"<a> & \u2028 é \"q\""},
		"a":{"type":"array","items":{"type":"number","minimum":1.5e-7,"maximum":12345678901234567890}},
		"m":{"type":"object","additionalProperties":false,"x-mcp-header":null}},"required":["z","a"]}`), &schema); err != nil {
		t.Fatal(err)
	}
	defs := []*mcpsdk.Tool{
		{Name: "plain"},
		{Name: "html<&>", Title: "T\u2029", Description: "Gadget\t\"number\" 1 \x01 of the <workshop>: 🛠",
			InputSchema: schema, OutputSchema: map[string]any{"type": "object", "b": []any{1.0, "2", nil, true}},
			Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes, Title: "ro"},
			Meta:        mcpsdk.Meta{"k": map[string]any{"y": 1.0, "x": "2"}}},
	}
	for _, def := range defs {
		raw, err := json.Marshal(def)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(raw)
		got, err := toolDigest(def)
		if err != nil {
			t.Fatal(err)
		}
		if got != sum {
			t.Errorf("digest of %s = %x, want %x (encoding/json: %s)", def.Name, got, sum, raw)
		}
	}
}

// TestRelistReusesOnlyUnchangedTools: an unchanged tool is the same Tool (its compiled schema
// kept); a changed schema is a new tool and a new snapshot version.
func TestRelistReusesOnlyUnchangedTools(t *testing.T) {
	def := func(maxLen float64) *mcpsdk.Tool {
		return &mcpsdk.Tool{Name: "note", InputSchema: map[string]any{"type": "object",
			"properties": map[string]any{"text": map[string]any{"type": "string", "maxLength": maxLen}}}}
	}
	first, err := reuseOrNewTool("s", def(5), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.inputSchema(); err != nil {
		t.Fatal(err)
	}
	prev := newSnapshot([]*Tool{first})
	again, err := reuseOrNewTool("s", def(5), prev.byName)
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Error("an unchanged tool was made anew")
	}
	changed, err := reuseOrNewTool("s", def(6), prev.byName)
	if err != nil {
		t.Fatal(err)
	}
	if changed == first || changed.Digest == first.Digest {
		t.Fatal("a changed schema was taken for the old tool")
	}
	if newSnapshot([]*Tool{changed}).Version == prev.Version {
		t.Error("a changed schema kept the snapshot version")
	}
	rs, err := changed.inputSchema()
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Validate(map[string]any{"text": "sixsix"}); err != nil {
		t.Errorf("the changed schema (maxLength 6) was not the one compiled: %v", err)
	}
}
