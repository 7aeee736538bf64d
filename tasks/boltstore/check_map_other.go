//go:build !unix

package boltstore

import "os"

// mapFile maps nothing here: the page check reads with ReadAt.
func mapFile(*os.File, int64) ([]byte, error) { return nil, nil }

// unmapFile undoes mapFile.
func unmapFile([]byte) {}
