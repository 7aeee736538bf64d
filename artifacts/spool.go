package artifacts

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"os"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// spoolAt is the canonical JSON a spool holds in memory; past it the rest
// goes to a temp file in the Store, so a large artifact streamed in chunks
// is never held whole. Below it, a small artifact costs no file.
const spoolAt = 1 << 20

// A spool is one artifact's canonical JSON, written and hashed chunk by
// chunk as the stream brings its parts, and installed in the Store when
// the artifact is finished. The Collector holds a spool instead of the
// artifact's parts.
type spool struct {
	store *Store
	h     hash.Hash
	mem   bytes.Buffer  // the JSON while it is small
	f     *os.File      // the temp file, once the JSON is over spoolAt
	w     *bufio.Writer // buffers f
	n     int64         // canonical bytes written
	parts int
	size  int64 // content, as the limit counts it (partSize)
}

func newSpool(store *Store) *spool { return &spool{store: store, h: sha256.New()} }

// Write implements io.Writer for writeCanonical's parts: hash, then memory
// or the temp file.
func (sp *spool) Write(p []byte) (int, error) {
	sp.h.Write(p)
	sp.n += int64(len(p))
	if sp.f != nil {
		return sp.w.Write(p)
	}
	sp.mem.Write(p)
	if sp.mem.Len() <= spoolAt {
		return len(p), nil
	}
	f, err := sp.store.createTemp()
	if err != nil {
		return 0, fmt.Errorf("spool artifact: %w", err)
	}
	sp.f, sp.w = f, bufio.NewWriterSize(f, 64<<10)
	_, err = sp.w.Write(sp.mem.Bytes())
	sp.mem = bytes.Buffer{}
	return len(p), err
}

// add appends parts to the canonical JSON: "[" before the first, ","
// between them.
func (sp *spool) add(parts []*a2a.Part, size int64) error {
	sp.size += size
	cw := &countingWriter{w: sp}
	for _, p := range parts {
		sep := byte(',')
		if sp.parts == 0 {
			sep = '['
		}
		cw.Write([]byte{sep})
		if err := writePart(cw, p); err != nil {
			return fmt.Errorf("%w: canonical json: %v", ErrInvalidArtifact, err)
		}
		sp.parts++
	}
	return cw.err
}

// finish closes the JSON, installs it under its digest (once: content the
// Store holds already is not written again) and returns the digest. The
// spool is spent either way.
func (sp *spool) finish(ctx context.Context) (string, error) {
	if sp.parts == 0 {
		sp.discard()
		return "", fmt.Errorf("put artifact: %w: no parts", ErrInvalidArtifact)
	}
	if err := ctx.Err(); err != nil {
		sp.discard()
		return "", fmt.Errorf("put artifact: %w", err)
	}
	if _, err := sp.Write([]byte{']'}); err != nil {
		sp.discard()
		return "", fmt.Errorf("put artifact: %w", err)
	}
	if sp.size > sp.store.max {
		sp.discard()
		return "", fmt.Errorf("put artifact: %d bytes of content, limit %d: %w", sp.size, sp.store.max, ErrTooLarge)
	}
	digest := digestPrefix + hex.EncodeToString(sp.h.Sum(nil))
	final := sp.store.path(artifactsTree, digest[len(digestPrefix):])
	if fi, err := os.Stat(final); err == nil && fi.Size() == sp.n {
		sp.discard()
		return digest, nil
	}
	if sp.f == nil { // small: written now, from memory
		f, err := sp.store.createTemp()
		if err != nil {
			return "", fmt.Errorf("put artifact %s: %w", digest, err)
		}
		sp.f, sp.w = f, bufio.NewWriterSize(f, 64<<10)
		if _, err := sp.w.Write(sp.mem.Bytes()); err != nil {
			sp.discard()
			return "", fmt.Errorf("put artifact %s: %w", digest, err)
		}
	}
	if err := sp.w.Flush(); err != nil {
		sp.discard()
		return "", fmt.Errorf("put artifact %s: %w", digest, err)
	}
	f := sp.f
	sp.f = nil
	if err := install(f, final); err != nil {
		return "", fmt.Errorf("put artifact %s: %w", digest, err)
	}
	return digest, nil
}

// discard drops what the spool holds, its temp file included.
func (sp *spool) discard() {
	if sp.f != nil {
		discard(sp.f)
		sp.f = nil
	}
	sp.mem = bytes.Buffer{}
}
