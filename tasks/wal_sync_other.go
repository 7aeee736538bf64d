//go:build !linux

package tasks

import "os"

// syncData makes f's written bytes durable.
func syncData(f *os.File) error { return f.Sync() }
