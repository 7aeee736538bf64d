package artifacts_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	gojcs "github.com/gowebpki/jcs"

	"github.com/handoff-a2a/handoff/artifacts"
)

func sample() *a2a.Artifact {
	return &a2a.Artifact{
		ID:   "a1",
		Name: "receipt",
		Parts: a2a.ContentParts{
			a2a.NewTextPart("refund <ok> & done"),
			a2a.NewRawPart([]byte{0, 1, 2, 0xff}),
			a2a.NewDataPart(map[string]any{"zeta": 1, "alpha": []any{1.5, "x", true, nil}, "big": 1e21}),
			a2a.NewFileURLPart("https://example.com/r.pdf", "application/pdf"),
			{Content: a2a.Text("with metadata"), Metadata: map[string]any{"b": 2, "a": "1"}},
		},
	}
}

func TestDigestStableAcrossJSONRoundTrip(t *testing.T) {
	a := sample()
	want, err := artifacts.Digest(a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(want, "sha256:") || len(want) != len("sha256:")+64 {
		t.Fatalf("digest %q: want sha256:<64 hex>", want)
	}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back a2a.Artifact
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got, err := artifacts.Digest(&back)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("digest after round trip = %s, want %s", got, want)
	}
}

// Digests are kept in ledgers and tasks; the canonical writer must give the
// bytes gowebpki/jcs gave before it, or a stored digest stops matching.
func TestDigestSameAsTransform(t *testing.T) {
	a := sample()
	a.Parts = append(a.Parts, a2a.NewDataPart(map[string]any{"\u00e9t\u00e9": "\U0001F600", "n": -0.0000012, "": json.Number("10")}))
	b, err := json.Marshal(a.Parts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := gojcs.Transform(b)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(c)
	want := "sha256:" + hex.EncodeToString(sum[:])
	got, err := artifacts.Digest(a)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("Digest = %s, want %s (gowebpki/jcs over %s)", got, want, b)
	}
}

func TestDigestNamesContentOnly(t *testing.T) {
	a, b := sample(), sample()
	b.ID, b.Name = "other", "other"
	da, _ := artifacts.Digest(a)
	db, _ := artifacts.Digest(b)
	if da != db {
		t.Errorf("same parts, different id and name: %s != %s", da, db)
	}
	b.Parts[0] = a2a.NewTextPart("refund <ok> & done!")
	if db, _ = artifacts.Digest(b); da == db {
		t.Errorf("different parts share digest %s", da)
	}
}

func TestDigestInvalid(t *testing.T) {
	for name, a := range map[string]*a2a.Artifact{
		"nil":      nil,
		"no parts": {ID: "a1"},
		"nil raw":  {ID: "a1", Parts: a2a.ContentParts{a2a.NewRawPart(nil)}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := artifacts.Digest(a); !errors.Is(err, artifacts.ErrInvalidArtifact) {
				t.Fatalf("err = %v, want ErrInvalidArtifact", err)
			}
		})
	}
}

// Large raw parts are base64-encoded straight into the hash and the file;
// their digest must still be gowebpki/jcs's over the whole JSON, whatever
// the part's length (each remainder mod 3), metadata (holding the strings
// the encoder looks for among others), filename and media type.
func TestDigestOfLargeRawSameAsTransform(t *testing.T) {
	raw := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i * 13 % 256)
		}
		return b
	}
	plain := a2a.NewRawPart(raw(4 << 10))
	named := a2a.NewRawPart(raw(5<<10 + 1))
	named.Filename, named.MediaType = "AAAA.bin", "application/////"
	tricky := a2a.NewRawPart(raw(1<<20 + 2))
	tricky.Metadata = map[string]any{"raw": "AAAA", "x": "////", "nested": map[string]any{"raw": "\"AAAA\""}, "é": 1e21}
	for name, parts := range map[string]a2a.ContentParts{
		"plain":        {plain},
		"named":        {named},
		"metadata":     {tricky},
		"among others": {a2a.NewTextPart("head"), plain, named, a2a.NewDataPart(map[string]any{"raw": "AAAA"}), tricky},
		"small":        {a2a.NewRawPart(raw(10)), a2a.NewRawPart([]byte{})},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(parts)
			if err != nil {
				t.Fatal(err)
			}
			c, err := gojcs.Transform(b)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(c)
			want := "sha256:" + hex.EncodeToString(sum[:])
			got, err := artifacts.Digest(&a2a.Artifact{ID: "a", Parts: parts})
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("Digest = %s, want %s", got, want)
			}
		})
	}
}
