package artifacts

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// DeleteRaw removes the raw blob stored under digest ([ErrInvalidDigest]);
// one that is not there is no error. Retention calls it for the blobs no
// kept task names any more.
func (s *Store) DeleteRaw(digest string) error {
	h, err := parseDigest(digest)
	if err != nil {
		return fmt.Errorf("delete raw blob: %w", err)
	}
	if err := os.Remove(s.path(rawTree, h)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete raw blob %s: %w", digest, err)
	}
	return nil
}
