package tasks

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDataSyncerAIO syncs a log segment through the AIO path, from several
// goroutines at once, and checks the bytes are there and the path stayed AIO.
func TestDataSyncerAIO(t *testing.T) {
	s := newDataSyncer()
	defer s.close()
	if !s.usesAIO() {
		t.Fatal("the kernel refused an AIO context: the task log falls back to fdatasync, which holds a scheduler P during every sync")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "segment"))
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
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 200 || b[2*(25*3+24)] != 3 || b[2*(25*3+24)+1] != 24 {
		t.Fatalf("file holds %d bytes, not the 200 written", len(b))
	}
}

// TestDataSyncerFallBack syncs what AIO cannot (a pipe): the syncer falls
// back to fdatasync for good and reports its error; a closed file is an
// error too, not a silent success.
func TestDataSyncerFallBack(t *testing.T) {
	s := newDataSyncer()
	defer s.close()
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
	if _, err := f.Write([]byte("record")); err != nil {
		t.Fatal(err)
	}
	if err := s.sync(f); err != nil {
		t.Fatalf("fdatasync after falling back: %v", err)
	}
	f.Close()
	if err := s.sync(f); err == nil {
		t.Fatal("synced a closed file without an error")
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
