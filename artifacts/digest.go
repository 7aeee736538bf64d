package artifacts

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/jcs"
)

const digestPrefix = "sha256:"

// Digest names an artifact's content: "sha256:" and the hex SHA-256 of the
// RFC 8785 canonical JSON of its parts. Only the parts count: the id, name
// and metadata say where the content came from, not what it is, so the same
// content from two tasks has one digest. Canonical JSON makes the digest
// survive a JSON round trip (key order, number formats and escapes are
// fixed), so a peer's artifact and our decoded copy of it agree.
//
// An artifact without parts, or with a part whose content would not decode
// back from JSON, is refused with [ErrInvalidArtifact].
func Digest(a *a2a.Artifact) (string, error) {
	h := sha256.New()
	if _, err := writeCanonical(h, a); err != nil {
		return "", fmt.Errorf("digest artifact: %w", err)
	}
	return digestPrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// writeCanonical writes the RFC 8785 canonical JSON of a's parts to w and
// returns its length. Large raw parts are base64-encoded straight into w
// (see rawFrame), so a 16 MiB artifact never becomes 22 MiB of JSON in
// memory; every other part goes through internal/jcs.
func writeCanonical(w io.Writer, a *a2a.Artifact) (int64, error) {
	if a == nil || len(a.Parts) == 0 {
		return 0, fmt.Errorf("%w: no parts", ErrInvalidArtifact)
	}
	if _, err := partsSize(a.Parts); err != nil {
		return 0, err
	}
	cw := &countingWriter{w: w}
	cw.Write([]byte{'['})
	for i, p := range a.Parts {
		if i > 0 {
			cw.Write([]byte{','})
		}
		if err := writePart(cw, p); err != nil {
			return cw.n, fmt.Errorf("%w: canonical json: %v", ErrInvalidArtifact, err)
		}
	}
	cw.Write([]byte{']'})
	return cw.n, cw.err
}

// streamRawFrom is the size from which a raw part is streamed rather than
// encoded whole: below it the two marshals of rawFrame cost more than
// they save.
const streamRawFrom = 4 << 10

func writePart(cw *countingWriter, p *a2a.Part) error {
	if raw, ok := p.Content.(a2a.Raw); ok && len(raw) >= streamRawFrom {
		prefix, suffix, err := rawFrame(p)
		if err == nil {
			cw.Write(prefix)
			enc := base64.NewEncoder(base64.StdEncoding, cw)
			enc.Write(raw)
			enc.Close()
			cw.Write(suffix)
			return cw.err
		}
		// No frame found: fall through to the whole encoding, which is right by definition.
	}
	b, err := jcs.Append(nil, p)
	if err != nil {
		return err
	}
	cw.Write(b)
	return cw.err
}

// rawFrame returns the canonical JSON of raw part p around its base64
// content. It encodes p twice with two 3-byte contents whose base64
// ("AAAA", "////") differ in every byte: the outputs then differ in
// exactly those four bytes, between quotes, and nowhere else, so the
// content's place is found without parsing, whatever the part's metadata
// holds. Anything else is an error, and the caller encodes p whole.
func rawFrame(p *a2a.Part) (prefix, suffix []byte, err error) {
	lo, hi := *p, *p
	lo.Content, hi.Content = a2a.Raw{0, 0, 0}, a2a.Raw{0xff, 0xff, 0xff}
	a, err := jcs.Append(nil, &lo)
	if err != nil {
		return nil, nil, err
	}
	b, err := jcs.Append(nil, &hi)
	if err != nil {
		return nil, nil, err
	}
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if len(a) != len(b) || i == 0 || i+5 > len(a) || a[i-1] != '"' || a[i+4] != '"' ||
		string(a[i:i+4]) != "AAAA" || string(b[i:i+4]) != "////" || !bytes.Equal(a[i+4:], b[i+4:]) {
		return nil, nil, fmt.Errorf("no raw content in the part's encoding")
	}
	return a[:i], a[i+4:], nil
}

// countingWriter counts what it wrote and keeps the first error, so a
// sequence of writes is checked once at its end.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return digestPrefix + hex.EncodeToString(sum[:])
}

// parseDigest returns the hex part of a digest, or ErrInvalidDigest. Only
// lowercase hex of the right length passes, so what reaches a file path is
// never a separator, a dot or a second spelling of the same digest.
func parseDigest(s string) (string, error) {
	h, ok := strings.CutPrefix(s, digestPrefix)
	if !ok || len(h) != 2*sha256.Size {
		return "", fmt.Errorf("%w: %q", ErrInvalidDigest, truncate(s))
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", fmt.Errorf("%w: %q", ErrInvalidDigest, truncate(s))
		}
	}
	return h, nil
}

// truncate keeps an error message short when the bad digest came from a peer.
func truncate(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
