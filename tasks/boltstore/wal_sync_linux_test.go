package boltstore

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// usesAIO reports whether s submits AIO requests.
func (s *dataSyncer) usesAIO() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctx != 0
}

// TestDataSyncerABI holds the request and event layouts to the kernel's
// (include/uapi/linux/aio_abi.h, little-endian).
func TestDataSyncerABI(t *testing.T) {
	var cb iocb
	offsets := []uintptr{unsafe.Offsetof(cb.data), unsafe.Offsetof(cb.key), unsafe.Offsetof(cb.rwFlags),
		unsafe.Offsetof(cb.opcode), unsafe.Offsetof(cb.reqprio), unsafe.Offsetof(cb.fildes), unsafe.Offsetof(cb.buf),
		unsafe.Offsetof(cb.nbytes), unsafe.Offsetof(cb.offset), unsafe.Offsetof(cb.reserved2), unsafe.Offsetof(cb.flags),
		unsafe.Offsetof(cb.resfd)}
	want := []uintptr{0, 8, 12, 16, 18, 20, 24, 32, 40, 48, 56, 60}
	if !slices.Equal(offsets, want) || unsafe.Sizeof(cb) != 64 {
		t.Errorf("iocb: offsets %v, size %d; want %v, 64", offsets, unsafe.Sizeof(cb), want)
	}
	var ev ioEvent
	if unsafe.Sizeof(ev) != 32 || unsafe.Offsetof(ev.res) != 16 {
		t.Errorf("io_event: size %d, res at %d; want 32, 16", unsafe.Sizeof(ev), unsafe.Offsetof(ev.res))
	}
	if iocbCmdFdsync != 3 || iocbFlagResfd != 1 {
		t.Errorf("IOCB_CMD_FDSYNC %d, IOCB_FLAG_RESFD %d; want 3, 1", iocbCmdFdsync, iocbFlagResfd)
	}
}

// TestDataSyncerAIO syncs a log segment through the AIO path, from several
// goroutines at once. The segment is open for writing only, which an
// fdatasync takes and a read request would not: the requests are syncs.
func TestDataSyncerAIO(t *testing.T) {
	s := newDataSyncer()
	defer s.close()
	if !s.usesAIO() {
		t.Fatal("the kernel refused an AIO context: the task log falls back to fdatasync, which holds a scheduler P during every sync")
	}
	path := filepath.Join(t.TempDir(), "segment")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 25 {
				if _, err := f.WriteAt([]byte{byte(i), byte(j)}, int64(2*(25*i+j))); err != nil {
					t.Error(err)
					return
				}
				if err := s.sync(f); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if !s.usesAIO() {
		t.Fatal("the syncer fell back to fdatasync on a regular file")
	}
	if fl, err := unix.FcntlInt(uintptr(s.eventFD), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK == 0 {
		t.Fatalf("eventfd flags %#x, %v: not non-blocking, so not waited for in the poller", fl, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		for j := range 25 {
			if at := 2 * (25*i + j); len(b) < at+2 || b[at] != byte(i) || b[at+1] != byte(j) {
				t.Fatalf("the file lacks write %d of goroutine %d", j, i)
			}
		}
	}
}

// TestDataSyncerFallBack syncs what AIO cannot (a pipe): the syncer falls
// back to fdatasync for good and reports its error. A closed file is an
// error on either path, not a silent success.
func TestDataSyncerFallBack(t *testing.T) {
	s := newDataSyncer()
	defer s.close()
	if !s.usesAIO() {
		t.Fatal("no AIO context to fall back from")
	}
	closed, err := os.Create(filepath.Join(t.TempDir(), "closed"))
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	if err := s.sync(closed); err == nil || !s.usesAIO() {
		t.Fatalf("AIO sync of a closed file: %v, still AIO: %v; want an error, and AIO kept", err, s.usesAIO())
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := s.sync(w); err == nil {
		t.Fatal("synced a pipe without an error")
	}
	if s.usesAIO() {
		t.Fatal("still submitting AIO requests after the kernel refused one")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "segment"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("record")); err != nil {
		t.Fatal(err)
	}
	if err := s.sync(f); err != nil {
		t.Fatalf("fdatasync after falling back: %v", err)
	}
	if err := s.sync(closed); err == nil {
		t.Fatal("fdatasync of a closed file without an error")
	}
}

// TestEventResult reads a completion: a failed sync (a disk error, which
// cannot be caused here) is its errno; an event of another request is an
// error, never a success.
func TestEventResult(t *testing.T) {
	if err := eventResult(ioEvent{data: 7}, 7); err != nil {
		t.Fatalf("completed sync: %v", err)
	}
	err := eventResult(ioEvent{data: 7, res: -int64(unix.EIO)}, 7)
	if !errors.Is(err, unix.EIO) || !errors.Is(err, errSyncFailed) {
		t.Fatalf("failed sync: %v, want EIO", err)
	}
	if err := eventResult(ioEvent{data: 6}, 7); err == nil || errors.Is(err, errSyncFailed) {
		t.Fatalf("event of another request: %v, want an error of its own", err)
	}
}

// BenchmarkLogSync is syncs of a log segment while other goroutines keep
// both Ps busy as request handlers do: pairs exchanging messages over
// loopback TCP, with some CPU work per message. With fdatasync the syncing
// goroutine holds a P in the call and waits for one after it; with AIO it
// waits in the network poller, as the handlers' connections do.
// busy_msgs/s is the handlers' messages per second while the syncs ran: the
// share of the machine the syncs left them.
func BenchmarkLogSync(b *testing.B) {
	for _, name := range []string{"fdatasync", "aio"} {
		b.Run(name, func(b *testing.B) {
			s := newDataSyncer()
			defer s.close()
			syncf := s.sync
			if name == "fdatasync" {
				syncf = func(f *os.File) error { return syncData(f) }
			} else if !s.usesAIO() {
				b.Fatal("no AIO context")
			}
			f, err := os.Create(filepath.Join(b.TempDir(), "segment"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			msgs, stop := busyPairs(b, 4*runtime.GOMAXPROCS(0))
			buf := make([]byte, 8<<10)
			b.ResetTimer()
			start, before := time.Now(), msgs.Load()
			for i := range b.N {
				if _, err := f.WriteAt(buf, int64(i%1024)*int64(len(buf))); err != nil {
					b.Fatal(err)
				}
				if err := syncf(f); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(msgs.Load()-before)/time.Since(start).Seconds(), "busy_msgs/s")
			b.StopTimer()
			stop()
		})
	}
}

// busyPairs starts n pairs of goroutines echoing a message over loopback
// TCP, each spending some CPU per message, and counts the messages.
func busyPairs(b *testing.B, n int) (*atomic.Int64, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var (
		msgs  atomic.Int64
		wg    sync.WaitGroup
		conns []net.Conn
	)
	echo := func(c net.Conn, first bool) {
		msg := make([]byte, 1)
		if first {
			if _, err := c.Write(msg); err != nil {
				return
			}
		}
		for {
			if _, err := io.ReadFull(c, msg); err != nil {
				return
			}
			spin()
			msgs.Add(1)
			if _, err := c.Write(msg); err != nil {
				return
			}
		}
	}
	for range n {
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		server, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, client, server)
		wg.Go(func() { echo(client, true) })
		wg.Go(func() { echo(server, false) })
	}
	ln.Close()
	return &msgs, func() {
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}
}

var spinSink int

// spin is a few microseconds of CPU work.
func spin() {
	x := 0
	for i := range 2000 {
		x += i * i
	}
	spinSink = x
}
