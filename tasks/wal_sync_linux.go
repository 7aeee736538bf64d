package tasks

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncData makes f's written bytes durable. fdatasync skips the inode's
// timestamps, which fsync writes through the journal every time: the log's
// fsync was most of its committer's CPU.
func syncData(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for serr = unix.Fdatasync(int(fd)); serr == unix.EINTR; serr = unix.Fdatasync(int(fd)) {
		}
	}); err != nil {
		return err
	}
	return serr
}
