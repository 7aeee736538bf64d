//go:build unix

package a2ahttp

import "syscall"

// openFileLimit is the process's soft limit on open file descriptors.
func openFileLimit() (uint64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, false
	}
	return rl.Cur, true
}
