package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"unsafe"

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

// A dataSyncer makes a log segment's written bytes durable, as syncData does,
// without holding one of the Go scheduler's Ps while the disk works. A
// goroutine blocked in fdatasync keeps its P until the runtime's monitor
// takes it back, and then waits for a free one when the call returns: with
// two Ps and thousands of syncs a second, that idled a large part of the
// machine (a blocking send measured about 1.5 times faster without it). The
// syncer instead submits the fdatasync as a Linux AIO request
// (IOCB_CMD_FDSYNC, which the kernel runs on a worker thread) and waits for
// its completion on an eventfd through Go's network poller, where a parked
// goroutine holds nothing.
//
// Written by hand: golang.org/x/sys/unix has the system call numbers but no
// AIO wrappers, and no maintained Go library offers them. Where the kernel
// refuses AIO (too old for IOCB_CMD_FDSYNC, a file system without it, a
// sandbox that filters the calls, the system's AIO limit reached), the
// syncer falls back to a plain fdatasync for good.
type dataSyncer struct {
	mu      sync.Mutex // one request at a time: the eventfd counts completions, not whose
	ctx     uintptr    // the AIO context; 0 once falling back to fdatasync
	event   *os.File   // the eventfd the kernel signals on completion
	eventFD uint32     // its descriptor, for the requests
	seq     uint64     // the last request's number, echoed back in its event

	// The request and the array io_submit reads it through live here, not
	// on the stack, so no pointer the kernel follows can move.
	cb  iocb
	cbs [1]*iocb
}

// iocb is the kernel's struct iocb (include/uapi/linux/aio_abi.h), laid out
// for a little-endian machine: aio_key comes before aio_rw_flags there.
type iocb struct {
	data      uint64
	key       uint32
	rwFlags   uint32
	opcode    uint16
	reqprio   int16
	fildes    uint32
	buf       uint64
	nbytes    uint64
	offset    int64
	reserved2 uint64
	flags     uint32
	resfd     uint32
}

// ioEvent is the kernel's struct io_event.
type ioEvent struct {
	data uint64
	obj  uint64
	res  int64
	res2 int64
}

const (
	iocbCmdFdsync = 3      // IOCB_CMD_FDSYNC
	iocbFlagResfd = 1 << 0 // IOCB_FLAG_RESFD: signal resfd on completion
)

// newDataSyncer sets up an AIO context and its eventfd, or a syncer that
// uses fdatasync when either is refused.
func newDataSyncer() *dataSyncer {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 { // iocb is laid out little-endian
		return &dataSyncer{}
	}
	refused := func(err error) *dataSyncer {
		slog.Default().Warn("task store log: syncing with fdatasync", slog.Any("error", err))
		return &dataSyncer{}
	}
	var ctx uintptr
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
		return refused(fmt.Errorf("io_setup: %w", e))
	}
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Syscall(unix.SYS_IO_DESTROY, ctx, 0, 0)
		return refused(fmt.Errorf("eventfd: %w", err))
	}
	// Non-blocking, so os.NewFile gives it to the network poller.
	return &dataSyncer{ctx: ctx, event: os.NewFile(uintptr(fd), "task store log eventfd"), eventFD: uint32(fd)}
}

// sync makes what was written to f before the call durable.
func (s *dataSyncer) sync(f *os.File) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == 0 {
		return syncData(f)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	s.seq++
	var serr error
	// Control keeps f's descriptor open for the submission; the kernel
	// holds its own reference to the file until the request completes.
	if err := rc.Control(func(fd uintptr) {
		s.cb = iocb{data: s.seq, opcode: iocbCmdFdsync, fildes: uint32(fd), flags: iocbFlagResfd, resfd: s.eventFD}
		s.cbs[0] = &s.cb
		for {
			n, _, e := unix.Syscall(unix.SYS_IO_SUBMIT, s.ctx, 1, uintptr(unsafe.Pointer(&s.cbs[0])))
			switch {
			case e == unix.EINTR:
				continue
			case e != 0:
				serr = e
			case n != 1:
				serr = fmt.Errorf("io_submit took %d requests of 1", n)
			}
			return
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		if errors.Is(serr, unix.EAGAIN) || errors.Is(serr, unix.ENOMEM) {
			return syncData(f) // short of resources for now
		}
		// EINVAL and the like: this kernel or file system cannot.
		s.fallBack(serr)
		return syncData(f)
	}
	ev, err := s.wait()
	if err == nil {
		err = eventResult(ev, s.seq)
	}
	if err != nil && !errors.Is(err, errSyncFailed) {
		// What became of the request is unknown: nothing more is
		// submitted to this context (io_destroy waits for the request),
		// and the store breaks on the error, as on a failed fdatasync.
		s.fallBack(err)
	}
	return err
}

// errSyncFailed marks the error of an fdatasync the kernel ran and failed.
var errSyncFailed = errors.New("fdatasync failed")

// eventResult is the outcome of request seq from its completion event.
func eventResult(ev ioEvent, seq uint64) error {
	if ev.data != seq {
		return fmt.Errorf("collect fdatasync: the event of request %d, not of %d", ev.data, seq)
	}
	if ev.res < 0 {
		return fmt.Errorf("%w: %w", errSyncFailed, unix.Errno(-ev.res))
	}
	return nil
}

// wait blocks, in the network poller, until the request completes and
// returns its event.
func (s *dataSyncer) wait() (ioEvent, error) {
	var count [8]byte
	for {
		n, err := s.event.Read(count[:])
		if err != nil {
			return ioEvent{}, fmt.Errorf("wait for fdatasync: %w", err)
		}
		if n != len(count) {
			return ioEvent{}, fmt.Errorf("wait for fdatasync: read %d bytes of the eventfd", n)
		}
		if c := binary.NativeEndian.Uint64(count[:]); c == 1 {
			break
		} else if c != 0 {
			return ioEvent{}, fmt.Errorf("wait for fdatasync: %d completions of one request", c)
		}
	}
	// The kernel posts the event before it signals the eventfd, so it is
	// there: the zero timeout only guards against waiting forever.
	var (
		ev ioEvent
		ts unix.Timespec
	)
	for {
		n, _, e := unix.Syscall6(unix.SYS_IO_GETEVENTS, s.ctx, 1, 1, uintptr(unsafe.Pointer(&ev)), uintptr(unsafe.Pointer(&ts)), 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return ioEvent{}, fmt.Errorf("collect fdatasync: %w", e)
		}
		if n != 1 {
			return ioEvent{}, errors.New("collect fdatasync: signalled but no event")
		}
		return ev, nil
	}
}

// fallBack releases the AIO context, saying why when why is not nil: from
// now on sync uses fdatasync.
func (s *dataSyncer) fallBack(why error) {
	if s.ctx == 0 {
		return
	}
	if why != nil {
		slog.Default().Warn("task store log: syncing with fdatasync from now on", slog.Any("error", why))
	}
	unix.Syscall(unix.SYS_IO_DESTROY, s.ctx, 0, 0)
	s.event.Close()
	s.ctx, s.event = 0, nil
}

// close releases the syncer's kernel resources.
func (s *dataSyncer) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallBack(nil)
}
