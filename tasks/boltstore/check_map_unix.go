//go:build unix

package boltstore

import (
	"os"
	"syscall"
)

// mapFile maps the first size bytes of f read-only, for the page check.
func mapFile(f *os.File, size int64) ([]byte, error) {
	if size == 0 || int64(int(size)) != size {
		return nil, nil // nothing to map, or more than the address space: ReadAt
	}
	return syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
}

// unmapFile undoes mapFile.
func unmapFile(m []byte) {
	if m != nil {
		syscall.Munmap(m) // read-only: nothing to lose if it fails
	}
}
