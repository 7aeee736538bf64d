package artifacts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
	b, err := canonicalParts(a)
	if err != nil {
		return "", fmt.Errorf("digest artifact: %w", err)
	}
	return digestOf(b), nil
}

func canonicalParts(a *a2a.Artifact) ([]byte, error) {
	if a == nil || len(a.Parts) == 0 {
		return nil, fmt.Errorf("%w: no parts", ErrInvalidArtifact)
	}
	if _, err := partsSize(a.Parts); err != nil {
		return nil, err
	}
	c, err := jcs.Append(nil, a.Parts)
	if err != nil {
		return nil, fmt.Errorf("%w: canonical json: %v", ErrInvalidArtifact, err)
	}
	return c, nil
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
