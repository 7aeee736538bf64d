package artifacts_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/artifacts"
)

// blobFiles lists the regular files under dir, temp files included.
func blobFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func newStore(t *testing.T, opts ...artifacts.Option) (*artifacts.Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := artifacts.NewStore(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func TestStorePutGet(t *testing.T) {
	s, dir := newStore(t)
	a := sample()
	want, _ := artifacts.Digest(a)
	digest, err := s.Put(t.Context(), a)
	if err != nil {
		t.Fatal(err)
	}
	if digest != want {
		t.Fatalf("Put digest %s, Digest %s", digest, want)
	}
	if again, err := s.Put(t.Context(), a); err != nil || again != digest {
		t.Fatalf("second Put = %s, %v; want %s", again, err, digest)
	}
	h := strings.TrimPrefix(digest, "sha256:")
	if files := blobFiles(t, dir); len(files) != 1 || files[0] != filepath.Join(dir, "sha256", h[:2], h[2:]) {
		t.Fatalf("files = %v, want one blob at sha256/%s/%s", files, h[:2], h[2:])
	}
	got, err := s.Get(t.Context(), digest)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := artifacts.Digest(got); d != digest {
		t.Errorf("Get returned content with digest %s, want %s", d, digest)
	}
	if got.Parts[0].Text() != "refund <ok> & done" {
		t.Errorf("first part = %q", got.Parts[0].Text())
	}
}

func TestStoreCorrupt(t *testing.T) {
	s, dir := newStore(t)
	digest, err := s.Put(t.Context(), sample())
	if err != nil {
		t.Fatal(err)
	}
	h := strings.TrimPrefix(digest, "sha256:")
	if err := os.WriteFile(filepath.Join(dir, "sha256", h[:2], h[2:]), []byte(`[{"text":"forged"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), digest); !errors.Is(err, artifacts.ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
	// Put repairs it: the damaged file has the wrong size.
	if _, err := s.Put(t.Context(), sample()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), digest); err != nil {
		t.Fatalf("after repair: %v", err)
	}
}

func TestStoreDigestStrings(t *testing.T) {
	s, _ := newStore(t)
	bad := []string{
		"",
		"sha256:",
		"sha256:../../../etc/passwd",
		"sha256:" + strings.Repeat("a", 63),
		"sha256:" + strings.Repeat("a", 65),
		"sha256:" + strings.Repeat("A", 64),
		"sha256:" + strings.Repeat("a", 62) + "/a",
		"sha256:" + strings.Repeat("a", 62) + "..",
		"sha512:" + strings.Repeat("a", 64),
		strings.Repeat("a", 64),
	}
	for _, d := range bad {
		if _, err := s.Get(t.Context(), d); !errors.Is(err, artifacts.ErrInvalidDigest) {
			t.Errorf("Get(%q) err = %v, want ErrInvalidDigest", d, err)
		}
		if _, err := s.OpenRaw(d); !errors.Is(err, artifacts.ErrInvalidDigest) {
			t.Errorf("OpenRaw(%q) err = %v, want ErrInvalidDigest", d, err)
		}
	}
	absent := "sha256:" + strings.Repeat("0", 64)
	if _, err := s.Get(t.Context(), absent); !errors.Is(err, artifacts.ErrNotFound) {
		t.Errorf("Get(absent) err = %v, want ErrNotFound", err)
	}
	if _, err := s.OpenRaw(absent); !errors.Is(err, artifacts.ErrNotFound) {
		t.Errorf("OpenRaw(absent) err = %v, want ErrNotFound", err)
	}
}

func TestStoreTooLarge(t *testing.T) {
	s, dir := newStore(t, artifacts.WithMaxBytes(32))
	a := sample()
	if _, err := s.Put(t.Context(), a); !errors.Is(err, artifacts.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if files := blobFiles(t, dir); len(files) != 0 {
		t.Errorf("files left: %v", files)
	}
}

// The limit counts content, not canonical JSON: a raw part of exactly the
// limit is kept (its base64 and framing make its JSON a third larger, and
// Get reads it back), one byte more is refused.
func TestStoreLimitCountsContent(t *testing.T) {
	const limit = 3000
	s, dir := newStore(t, artifacts.WithMaxBytes(limit))
	at := &a2a.Artifact{ID: "a", Parts: a2a.ContentParts{a2a.NewRawPart(bytes.Repeat([]byte{0xfe}, limit))}}
	d, err := s.Put(t.Context(), at)
	if err != nil {
		t.Fatalf("Put of %d raw bytes, limit %d: %v", limit, limit, err)
	}
	if back, err := s.Get(t.Context(), d); err != nil || !bytes.Equal(back.Parts[0].Raw(), at.Parts[0].Raw()) {
		t.Fatalf("Get: %v", err)
	}
	over := &a2a.Artifact{ID: "b", Parts: a2a.ContentParts{a2a.NewRawPart(bytes.Repeat([]byte{0xfe}, limit+1))}}
	if _, err := s.Put(t.Context(), over); !errors.Is(err, artifacts.ErrTooLarge) || !strings.Contains(err.Error(), "limit 3000") {
		t.Fatalf("Put of %d raw bytes: err = %v, want ErrTooLarge naming the limit", limit+1, err)
	}
	if files := blobFiles(t, dir); len(files) != 1 {
		t.Errorf("files: %v, want the one artifact", files)
	}
}

// Put streams the canonical JSON: storing an 8 MiB raw artifact (11 MiB
// of JSON) allocates a small fraction of it, where encoding it whole
// allocated several copies.
func TestStorePutStreams(t *testing.T) {
	s, _ := newStore(t)
	raw := make([]byte, 8<<20)
	for i := range raw {
		raw[i] = byte(i * 7 % 251)
	}
	a := &a2a.Artifact{ID: "a", Parts: a2a.ContentParts{a2a.NewRawPart(raw)}}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := s.Put(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	if _, err := artifacts.Digest(a); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("Put and Digest of 8 MiB allocated %d bytes, want under 1 MiB", got)
	}
}

func TestStoreRaw(t *testing.T) {
	s, dir := newStore(t)
	content := bytes.Repeat([]byte("raw-part "), 10000)
	digest, n, err := s.PutRaw(t.Context(), bytes.NewReader(content), int64(len(content)))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	if want := "sha256:" + hex.EncodeToString(sum[:]); digest != want || n != int64(len(content)) {
		t.Fatalf("PutRaw = %s, %d; want %s, %d", digest, n, want, len(content))
	}
	if _, err := s.Get(t.Context(), digest); !errors.Is(err, artifacts.ErrNotFound) {
		t.Errorf("Get(raw digest) err = %v, want ErrNotFound: raw blobs are not artifacts", err)
	}
	rc, err := s.OpenRaw(digest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("OpenRaw read %d bytes, err %v; want %d bytes", len(got), err, len(content))
	}

	h := strings.TrimPrefix(digest, "sha256:")
	path := filepath.Join(dir, "raw", "sha256", h[:2], h[2:])
	// Tampered, shorter, longer, or the same size: never read back whole.
	for _, bad := range [][]byte{[]byte("tampered"), content[:len(content)-1], append(bytes.Clone(content), 'x'),
		append(bytes.Clone(content[:len(content)-1]), content[len(content)-1]^1)} {
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		rc, err = s.OpenRaw(digest)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if !errors.Is(err, artifacts.ErrCorrupt) || int64(len(got)) >= rc.Size() {
			t.Fatalf("reading a tampered blob of %d bytes: %d bytes, err = %v; want fewer than its size and ErrCorrupt", len(bad), len(got), err)
		}
	}
}

func TestStoreRawOverLimitLeavesNothing(t *testing.T) {
	s, dir := newStore(t)
	_, _, err := s.PutRaw(t.Context(), strings.NewReader(strings.Repeat("x", 101)), 100)
	if !errors.Is(err, artifacts.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if files := blobFiles(t, dir); len(files) != 0 {
		t.Errorf("files left: %v", files)
	}
	// Exactly the limit fits.
	if _, n, err := s.PutRaw(t.Context(), strings.NewReader(strings.Repeat("x", 100)), 100); err != nil || n != 100 {
		t.Fatalf("PutRaw at the limit = %d, %v", n, err)
	}
}
