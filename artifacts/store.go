package artifacts

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/durable"
)

// The layout under a Store's directory. Artifacts and raw blobs live in
// separate trees, so a digest handed to Get never opens a raw blob and the
// other way round; temp files share the file system, so rename is atomic.
const (
	artifactsTree = "sha256"
	rawTree       = "raw/sha256"
	tmpDir        = "tmp"
)

// A Store keeps artifacts and raw blobs on disk, each under its digest:
// DIR/sha256/ab/cdef… for an artifact's canonical JSON, DIR/raw/sha256/ab/cdef…
// for a raw blob. Every write is atomic (temp file, fsync, rename, fsync of
// the directory), so a crash leaves either the whole blob or none. Several
// goroutines may use one Store.
type Store struct {
	dir string
	max int64
}

// NewStore opens (creating it if needed) a Store in dir. [WithMaxBytes]
// bounds an artifact's content (see [ContentSize]), 16 MiB by default.
func NewStore(dir string, opts ...Option) (*Store, error) {
	c := newConfig(opts)
	for _, d := range []string{artifactsTree, rawTree, tmpDir} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("open artifact store: %w", err)
		}
	}
	return &Store{dir: dir, max: c.maxBytes}, nil
}

// ContentSize is what the size limit counts of an artifact: the bytes of
// its raw parts, the length of its text and URL parts, and the JSON of
// its data parts; not the base64 and escapes of its canonical JSON, so a
// 16 MiB file is a 16 MiB artifact. A part that cannot be hashed is
// [ErrInvalidArtifact].
func ContentSize(a *a2a.Artifact) (int64, error) {
	if a == nil || len(a.Parts) == 0 {
		return 0, fmt.Errorf("%w: no parts", ErrInvalidArtifact)
	}
	return partsSize(a.Parts)
}

// Put stores the canonical JSON of a's parts and returns its [Digest]. It is
// idempotent: the same content is written once. Content over the limit
// ([ContentSize]) is refused with [ErrTooLarge], an artifact without a
// digest with [ErrInvalidArtifact]. The canonical JSON is streamed, never
// held whole: one pass hashes it, and a second writes it when the Store
// does not hold it yet.
func (s *Store) Put(ctx context.Context, a *a2a.Artifact) (digest string, err error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("put artifact: %w", err)
	}
	size, err := ContentSize(a)
	if err != nil {
		return "", fmt.Errorf("put artifact: %w", err)
	}
	if size > s.max {
		return "", fmt.Errorf("put artifact: %d bytes of content, limit %d: %w", size, s.max, ErrTooLarge)
	}
	h := sha256.New()
	n, err := writeCanonical(h, a)
	if err != nil {
		return "", fmt.Errorf("put artifact: %w", err)
	}
	digest = digestPrefix + hex.EncodeToString(h.Sum(nil))
	final := s.path(artifactsTree, digest[len(digestPrefix):])
	// A file of the right size is the same content: a blob is only ever
	// renamed into place whole. A wrong size (a damaged file) is rewritten.
	if fi, err := os.Stat(final); err == nil && fi.Size() == n {
		return digest, nil
	}
	f, err := s.createTemp()
	if err != nil {
		return "", fmt.Errorf("put artifact %s: %w", digest, err)
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	if _, err := writeCanonical(bw, a); err == nil {
		err = bw.Flush()
	}
	if err != nil {
		discard(f)
		return "", fmt.Errorf("put artifact %s: %w", digest, err)
	}
	if err := install(f, final); err != nil {
		return "", fmt.Errorf("put artifact %s: %w", digest, err)
	}
	return digest, nil
}

// maxCanonical bounds the stored canonical JSON of content within limit:
// JSON escapes make a text byte at most 6 ("\u001f"), base64 a raw byte
// 4/3, and part metadata is not counted in the content.
func maxCanonical(limit int64) int64 { return 6*limit + 1<<20 }

// Get reads the artifact stored under digest. The result holds only the
// parts: the digest names content, and the id and name belong to the task
// that sent it. The content is hashed again on every read, and a file that
// no longer matches its digest is refused with [ErrCorrupt]. A digest the
// Store does not hold is [ErrNotFound]; a malformed one [ErrInvalidDigest].
func (s *Store) Get(ctx context.Context, digest string) (*a2a.Artifact, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get artifact: %w", err)
	}
	h, err := parseDigest(digest)
	if err != nil {
		return nil, fmt.Errorf("get artifact: %w", err)
	}
	f, err := os.Open(s.path(artifactsTree, h))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("get artifact %s: %w", digest, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get artifact %s: %w", digest, err)
	}
	defer f.Close()
	limit := maxCanonical(s.max)
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("get artifact %s: %w", digest, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("get artifact %s: over %d bytes: %w", digest, limit, ErrTooLarge)
	}
	if digestOf(b) != digest {
		return nil, fmt.Errorf("get artifact %s: %w", digest, ErrCorrupt)
	}
	var parts a2a.ContentParts
	if err := json.Unmarshal(b, &parts); err != nil {
		// The hash matches, so Put did not write this: someone placed it.
		return nil, fmt.Errorf("get artifact %s: %w: %v", digest, ErrCorrupt, err)
	}
	a := &a2a.Artifact{Parts: parts}
	if n, err := ContentSize(a); err == nil && n > s.max {
		return nil, fmt.Errorf("get artifact %s: %d bytes of content, limit %d: %w", digest, n, s.max, ErrTooLarge)
	}
	return a, nil
}

// PutRaw streams r into a raw blob, hashing while it writes, and returns the
// blob's digest and size. More than maxBytes (the Store's limit when
// maxBytes is zero or less) is refused with [ErrTooLarge] and leaves no file
// behind, as does any other failure, a cancelled ctx included.
func (s *Store) PutRaw(ctx context.Context, r io.Reader, maxBytes int64) (digest string, n int64, err error) {
	if maxBytes <= 0 {
		maxBytes = s.max
	}
	f, err := s.createTemp()
	if err != nil {
		return "", 0, fmt.Errorf("put raw blob: %w", err)
	}
	h := sha256.New()
	// One byte past the limit is enough to know the blob is too large.
	n, err = io.Copy(io.MultiWriter(f, h), io.LimitReader(ctxReader{ctx, r}, maxBytes+1))
	if err == nil && n > maxBytes {
		err = fmt.Errorf("more than %d bytes: %w", maxBytes, ErrTooLarge)
	}
	if err != nil {
		discard(f)
		return "", 0, fmt.Errorf("put raw blob: %w", err)
	}
	hx := hex.EncodeToString(h.Sum(nil))
	if err := install(f, s.path(rawTree, hx)); err != nil {
		return "", 0, fmt.Errorf("put raw blob %s%s: %w", digestPrefix, hx, err)
	}
	return digestPrefix + hx, n, nil
}

// OpenRaw opens the raw blob stored under digest ([ErrNotFound],
// [ErrInvalidDigest]). The blob hashes what it reads and checks the digest
// before it hands over its last bytes: content that does not match is
// [ErrCorrupt] in place of those bytes, so a receiver told the blob's
// [RawBlob.Size] (an HTTP Content-Length) never gets it whole. A caller
// that streams it on must still abort rather than end cleanly.
func (s *Store) OpenRaw(digest string) (*RawBlob, error) {
	h, err := parseDigest(digest)
	if err != nil {
		return nil, fmt.Errorf("open raw blob: %w", err)
	}
	f, err := os.Open(s.path(rawTree, h))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open raw blob %s: %w", digest, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open raw blob %s: %w", digest, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open raw blob %s: %w", digest, err)
	}
	return &RawBlob{f: f, h: sha256.New(), want: h, size: fi.Size()}, nil
}

// path shards by the first two hex digits, so no directory grows to
// millions of entries.
func (s *Store) path(tree, hx string) string {
	return filepath.Join(s.dir, tree, hx[:2], hx[2:])
}

func (s *Store) createTemp() (*os.File, error) {
	return os.CreateTemp(filepath.Join(s.dir, tmpDir), "blob-*")
}

// install makes the written temp file f the blob at final: fsync, close,
// rename, then fsync the directories whose entries changed, so the blob
// survives a crash once install returns. On failure the temp file is removed.
func install(f *os.File, final string) error {
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	shard := filepath.Dir(final)
	newShard := false
	if err == nil {
		switch mkErr := os.Mkdir(shard, 0o700); {
		case mkErr == nil:
			newShard = true
		case !errors.Is(mkErr, fs.ErrExist):
			err = mkErr
		}
	}
	if err == nil {
		err = os.Rename(f.Name(), final)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := durable.SyncDir(shard); err != nil {
		return err
	}
	if newShard {
		return durable.SyncDir(filepath.Dir(shard))
	}
	return nil
}

// discard closes and removes a temp file that will not be installed.
func discard(f *os.File) {
	f.Close()
	os.Remove(f.Name())
}

// ctxReader stops a long PutRaw when its ctx ends, between reads. It lives
// for one PutRaw call only, so holding the ctx does not outlive the request.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// A RawBlob reads one raw blob from a [Store], checking its digest as it
// goes (see [Store.OpenRaw]).
type RawBlob struct {
	f    *os.File
	h    hash.Hash
	want string
	size int64
	read int64
	err  error // ErrCorrupt once found: every later Read returns it
}

// Size is the blob's length in bytes, as stored.
func (v *RawBlob) Size() int64 { return v.size }

// Read implements io.Reader. The read that reaches the blob's end (by its
// size or by io.EOF) returns its bytes only if the whole content matches
// the digest and the size.
func (v *RawBlob) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.f.Read(p)
	v.h.Write(p[:n])
	v.read += int64(n)
	if err == io.EOF || v.read >= v.size {
		if v.read != v.size || hex.EncodeToString(v.h.Sum(nil)) != v.want {
			v.err = fmt.Errorf("raw blob %s%s: %w", digestPrefix, v.want, ErrCorrupt)
			return 0, v.err
		}
	}
	return n, err
}

// Close implements io.Closer.
func (v *RawBlob) Close() error { return v.f.Close() }
