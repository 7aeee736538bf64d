package boltstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	bolt "go.etcd.io/bbolt"
)

// The layout of bbolt's pages (go.etcd.io/bbolt/internal/common/page.go):
// a 16-byte header (id, flags, count, overflow), then count 16-byte
// elements. A branch element is pos, ksize (uint32s) and a child page id;
// a leaf element flags, pos, ksize, vsize (uint32s), its key and value pos
// bytes after the element's own start. A leaf element with the bucket flag
// holds a bucket: its root page id and sequence, and when the root is 0 the
// bucket's one leaf page inline after them.
const (
	boltPageHeader   = 16
	boltElementSize  = 16
	boltBranchPage   = 0x01
	boltLeafPage     = 0x02
	boltFreelistPage = 0x10
	boltBucketLeaf   = 0x01
	boltBucketHeader = 16
	boltMaxDepth     = 64 // far deeper than any tree bbolt builds
)

// pageWalk reads the page tree of a store file with ReadAt, never through a
// memory map, to refuse what bbolt would fault or panic on when it opens
// the file: at open it walks every page under the meta page in a goroutine
// of its own (to rebuild the free page list), where neither a fault nor a
// panic can be recovered.
type pageWalk struct {
	f    *os.File
	ps   int64    // page size
	hwm  uint64   // the meta page's high-water mark: pages are below it
	seen []uint64 // a bit per page of the file read so far
	// m maps the file read-only where the platform can (mapFile): a read is
	// then a slice, not a syscall and a copy, which at 10^6 tasks (1.2 GB,
	// 300,000 pages) was most of a start-up's 2 s. Nil: pages are read with
	// ReadAt. A fault reading it (an I/O error) is recovered by the caller's
	// guardFaults as damage.
	m []byte
}

// at returns the n bytes of the file at off.
func (w *pageWalk) at(off, n int64) ([]byte, error) {
	if w.m == nil {
		b := make([]byte, n)
		if _, err := w.f.ReadAt(b, off); err != nil {
			return nil, err
		}
		return b, nil
	}
	if off < 0 || n < 0 || off+n > int64(len(w.m)) {
		return nil, io.ErrUnexpectedEOF
	}
	return w.m[off : off+n : off+n], nil
}

// checkBoltPages walks the tree under m, the meta page bbolt will use, and
// the free page list page when there is one.
func checkBoltPages(f *os.File, m boltMeta) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("check pages: %w", err)
	}
	// A bitset sized by the file, not the meta page's claim, which may be
	// damaged: at 10^6 tasks a map of seen pages took half of the check.
	w := &pageWalk{f: f, ps: int64(m.pageSize), hwm: m.pgid, seen: make([]uint64, fi.Size()/int64(m.pageSize)/64+1)}
	if w.m, err = mapFile(f, fi.Size()); err != nil {
		return fmt.Errorf("check pages: %w", err)
	}
	defer unmapFile(w.m)
	if m.freelist != boltNoFreelist {
		p, err := w.read(m.freelist)
		if err != nil {
			return err
		}
		if flags := binary.LittleEndian.Uint16(p[8:]); flags != boltFreelistPage {
			return fmt.Errorf("page %d: the free page list's page has type %#x", m.freelist, flags)
		}
	}
	_, err = w.visit(m.root, 0, nil, nil)
	return err
}

// read reads page id whole, overflow pages included, and checks it is a
// page of the file that names itself and is read once.
func (w *pageWalk) read(id uint64) ([]byte, error) {
	if id < 2 || id >= w.hwm {
		return nil, fmt.Errorf("a page refers to page %d, outside the file's pages 2 to %d", id, w.hwm-1)
	}
	// One read for the page, another only for its overflow pages.
	h, err := w.at(int64(id)*w.ps, w.ps)
	if err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	le := binary.LittleEndian
	if got := le.Uint64(h); got != id {
		return nil, fmt.Errorf("page %d names itself page %d", id, got)
	}
	overflow := uint64(le.Uint32(h[12:]))
	// No value bbolt stores needs more pages than its largest one does; a
	// larger count is damage, refused before it is read into memory.
	if overflow > uint64(bolt.MaxValueSize)/uint64(w.ps)+1 {
		return nil, fmt.Errorf("page %d claims %d overflow pages, more than any value needs", id, overflow)
	}
	if id+overflow >= w.hwm {
		return nil, fmt.Errorf("page %d runs %d pages past the file's pages", id, id+overflow-w.hwm+1)
	}
	for i := id; i <= id+overflow; i++ {
		if i/64 >= uint64(len(w.seen)) {
			return nil, fmt.Errorf("page %d: %w", i, io.ErrUnexpectedEOF)
		}
		if w.seen[i/64]&(1<<(i%64)) != 0 {
			return nil, fmt.Errorf("page %d is referred to twice", i)
		}
		w.seen[i/64] |= 1 << (i % 64)
	}
	if overflow == 0 {
		return h, nil
	}
	p, err := w.at(int64(id)*w.ps, int64(overflow+1)*w.ps)
	if err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	return p, nil
}

// visit checks page id and the pages under it, whose keys must be at
// least low and below high (nil: no bound), and returns the last key under
// it.
func (w *pageWalk) visit(id uint64, depth int, low, high []byte) ([]byte, error) {
	if depth > boltMaxDepth {
		return nil, fmt.Errorf("page %d: the tree is more than %d pages deep", id, boltMaxDepth)
	}
	p, err := w.read(id)
	if err != nil {
		return nil, err
	}
	return w.node(p, id, depth, low, high)
}

// keyOrder checks key, element i of page id, as bbolt's own check does
// (verifyKeyOrder in tx_check.go): it follows prev (for the first, the
// bound from above) and is below high. bbolt panics on what this refuses,
// when it opens the file.
func keyOrder(id uint64, i int, key, prev, high []byte) error {
	switch c := bytes.Compare(prev, key); {
	case i == 0 && prev != nil && c > 0, i > 0 && c >= 0:
		return fmt.Errorf("page %d: key %d is out of order", id, i)
	}
	if high != nil && bytes.Compare(key, high) >= 0 {
		return fmt.Errorf("page %d: key %d is past its parent's next key", id, i)
	}
	return nil
}

// node checks the elements of page p (id, or its parent's for a bucket's
// inline page) and visits the pages they refer to; see visit.
func (w *pageWalk) node(p []byte, id uint64, depth int, low, high []byte) ([]byte, error) {
	if len(p) < boltPageHeader {
		return nil, fmt.Errorf("page %d: %d bytes, shorter than a page header", id, len(p))
	}
	le := binary.LittleEndian
	flags, count := le.Uint16(p[8:]), int(le.Uint16(p[10:]))
	if flags != boltBranchPage && flags != boltLeafPage {
		return nil, fmt.Errorf("page %d has type %#x, not a branch or leaf page", id, flags)
	}
	if boltPageHeader+count*boltElementSize > len(p) {
		return nil, fmt.Errorf("page %d: %d elements do not fit in it", id, count)
	}
	if flags == boltBranchPage && count == 0 {
		// bbolt never writes one, and its cursor reads element 0 of it anyway.
		return nil, fmt.Errorf("page %d is a branch page without elements", id)
	}
	// key is element i's key; ok is false when it lies outside the page.
	key := func(i int) ([]byte, bool) {
		off := boltPageHeader + i*boltElementSize
		e := p[off : off+boltElementSize]
		pos, ksize := le.Uint32(e), le.Uint32(e[4:])
		if flags == boltLeafPage {
			pos, ksize = le.Uint32(e[4:]), le.Uint32(e[8:])
		}
		start, end := uint64(off)+uint64(pos), uint64(off)+uint64(pos)+uint64(ksize)
		if end > uint64(len(p)) {
			return nil, false
		}
		return p[start:end], true
	}
	running := low
	for i := range count {
		off := boltPageHeader + i*boltElementSize
		e := p[off : off+boltElementSize]
		k, ok := key(i)
		if !ok {
			return nil, fmt.Errorf("page %d: element %d's key lies outside the page", id, i)
		}
		if err := keyOrder(id, i, k, running, high); err != nil {
			return nil, err
		}
		if flags == boltBranchPage {
			next := high
			if i+1 < count {
				if next, ok = key(i + 1); !ok {
					return nil, fmt.Errorf("page %d: element %d's key lies outside the page", id, i+1)
				}
			}
			last, err := w.visit(le.Uint64(e[8:]), depth+1, k, next)
			if err != nil {
				return nil, err
			}
			running = last
			continue
		}
		running = k
		vstart := uint64(off) + uint64(le.Uint32(e[4:])) + uint64(le.Uint32(e[8:]))
		vend := vstart + uint64(le.Uint32(e[12:]))
		if vend > uint64(len(p)) {
			return nil, fmt.Errorf("page %d: element %d's value lies outside the page", id, i)
		}
		if le.Uint32(e)&boltBucketLeaf == 0 {
			continue
		}
		v := p[vstart:vend]
		if len(v) < boltBucketHeader {
			return nil, fmt.Errorf("page %d: element %d is a bucket of %d bytes", id, i, len(v))
		}
		// A bucket's keys are ordered within the bucket, with no bound
		// from the keys around it.
		if root := le.Uint64(v); root != 0 {
			if _, err := w.visit(root, depth+1, nil, nil); err != nil {
				return nil, err
			}
			continue
		}
		inline := v[boltBucketHeader:]
		if len(inline) < boltPageHeader || le.Uint16(inline[8:]) != boltLeafPage {
			return nil, fmt.Errorf("page %d: element %d's inline bucket is not a leaf page", id, i)
		}
		if depth+1 > boltMaxDepth {
			return nil, fmt.Errorf("page %d: the tree is more than %d pages deep", id, boltMaxDepth)
		}
		if _, err := w.node(inline, id, depth+1, nil, nil); err != nil {
			return nil, err
		}
	}
	if flags == boltLeafPage && count == 0 {
		return nil, nil
	}
	return running, nil
}
