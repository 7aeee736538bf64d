package durable

import "os"

// SyncDir makes the entries created, renamed or removed in dir durable: a
// file's own fsync does not cover its name.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
