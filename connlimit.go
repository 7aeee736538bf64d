package handoff

import (
	"container/list"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimiter is a net.Listener that bounds the connections the server
// holds, in all (max) and per client address (perIP, 0: no bound), so that
// idle or slow clients run it out of neither file descriptors nor memory.
//
// At a bound, a new connection makes room by closing a spare one: a
// connection waiting for its first request or idle between requests,
// longest waiting first, and among those the ones that never carried an
// authenticated request before the ones that did. A busy connection (a
// request being read or answered) is never closed; when every connection
// is busy, the new one is answered 503 with Retry-After and closed at once,
// before any of it is read. So a flood of idle or unauthenticated
// connections only ever displaces itself, and a caller that authenticated
// on its keep-alive connection keeps it while the flood lasts. Closing an
// idle keep-alive connection is what its client is ready for (the server
// may close one at any time, RFC 9112 §9.6); refusing instead would have
// let a flood of idle connections shut out everyone else.
type connLimiter struct {
	net.Listener
	max, perIP int
	log        *slog.Logger

	mu      sync.Mutex
	total   int
	byIP    map[string]int
	spare   list.List // *limitedConn never authenticated on, waiting longest first
	trusted list.List // *limitedConn authenticated on, waiting longest first
	// made and refused count what the bounds did since the last warning.
	made, refused int
	warned        time.Time

	// refusing bounds the connections being told 503 at once; past it a
	// connection is closed without a word.
	refusing chan struct{}
}

// newConnLimiter wraps ln; see [connLimiter].
func newConnLimiter(ln net.Listener, max, perIP int, log *slog.Logger) *connLimiter {
	return &connLimiter{Listener: ln, max: max, perIP: perIP, log: log, byIP: map[string]int{}, refusing: make(chan struct{}, 64)}
}

// limitedConn is one connection the limiter counts.
type limitedConn struct {
	net.Conn
	l  *connLimiter
	ip string

	// Guarded by l.mu.
	counted    bool          // in total and byIP
	waiting    *list.Element // in spare or trusted while it waits for a request
	authorized bool          // carried an authenticated request
}

// Close implements net.Conn, and gives the connection's place back.
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.dropLocked(c)
	c.l.mu.Unlock()
	return err
}

// Accept implements net.Listener: it returns the next connection there is
// room for, making room as [connLimiter] says.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := c.RemoteAddr().String()
		if host, _, err := net.SplitHostPort(ip); err == nil {
			ip = host
		}
		lc := &limitedConn{Conn: c, l: l, ip: ip}
		admitted, victims := l.admit(lc)
		for _, v := range victims {
			_ = v.Conn.Close() // its server goroutine sees the read fail and ends
		}
		if admitted {
			return lc, nil
		}
		l.refuse(c)
	}
}

// admit counts c in if there is room, or room can be made; victims are the
// connections to close for it, already uncounted.
func (l *connLimiter) admit(c *limitedConn) (admitted bool, victims []*limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.warnLocked()
	if l.perIP > 0 && l.byIP[c.ip] >= l.perIP {
		v := l.spareLocked(c.ip)
		if v == nil {
			l.refused++
			return false, nil
		}
		l.dropLocked(v)
		victims = append(victims, v)
		l.made++
	}
	if l.total >= l.max {
		v := l.spareLocked("")
		if v == nil {
			l.refused++
			return false, victims
		}
		l.dropLocked(v)
		victims = append(victims, v)
		l.made++
	}
	c.counted = true
	l.total++
	l.byIP[c.ip]++
	l.waitLocked(c)
	return true, victims
}

// spareLocked returns the connection to close first, from ip ("" any), or
// nil when every connection is busy.
func (l *connLimiter) spareLocked(ip string) *limitedConn {
	for _, q := range []*list.List{&l.spare, &l.trusted} {
		for e := q.Front(); e != nil; e = e.Next() {
			if c := e.Value.(*limitedConn); ip == "" || c.ip == ip {
				return c
			}
		}
	}
	return nil
}

// waitLocked queues c as spare: it waits for a request.
func (l *connLimiter) waitLocked(c *limitedConn) {
	if c.waiting != nil || !c.counted {
		return
	}
	if c.authorized {
		c.waiting = l.trusted.PushBack(c)
	} else {
		c.waiting = l.spare.PushBack(c)
	}
}

// busyLocked takes c out of the spare queues: a request runs on it.
func (l *connLimiter) busyLocked(c *limitedConn) {
	if c.waiting == nil {
		return
	}
	if c.authorized {
		l.trusted.Remove(c.waiting)
	} else {
		l.spare.Remove(c.waiting)
	}
	c.waiting = nil
}

// dropLocked stops counting c.
func (l *connLimiter) dropLocked(c *limitedConn) {
	if !c.counted {
		return
	}
	l.busyLocked(c)
	c.counted = false
	l.total--
	if l.byIP[c.ip]--; l.byIP[c.ip] <= 0 {
		delete(l.byIP, c.ip)
	}
}

// warnLocked logs, at most every 10s, that the bounds were reached.
func (l *connLimiter) warnLocked() {
	if l.made+l.refused == 0 || time.Since(l.warned) < 10*time.Second {
		return
	}
	l.log.Warn("connection limit reached: spare connections closed to make room, new ones refused with 503 when none was spare",
		slog.Int("max_connections", l.max), slog.Int("max_connections_per_ip", l.perIP), slog.Int("connections", l.total),
		slog.Int("closed_to_make_room", l.made), slog.Int("refused", l.refused))
	l.made, l.refused, l.warned = 0, 0, time.Now()
}

// busyResponse is what a connection there is no room for is told.
var busyResponse = func() string {
	body := "the agent holds as many connections as it can; try again shortly\n"
	return fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\n"+
		"Connection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

// refuse answers c 503 and closes it, off the accept loop. The request it
// carries is read (a little, briefly) after the answer, so that closing the
// socket with it unread does not reset the connection before the client
// reads the 503.
func (l *connLimiter) refuse(c net.Conn) {
	select {
	case l.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := io.WriteString(c, busyResponse); err != nil {
			return
		}
		if tc, ok := c.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}()
}

// connState is the server's ConnState hook: it moves each connection
// between busy and spare.
func (l *connLimiter) connState(nc net.Conn, s http.ConnState) {
	c, ok := nc.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch s {
	case http.StateNew, http.StateIdle:
		l.waitLocked(c)
	case http.StateActive:
		l.busyLocked(c)
	case http.StateHijacked, http.StateClosed:
		l.dropLocked(c)
	}
}

// connKey is the request context key of the connection a request came on.
type connKey struct{}

// connContext is the server's ConnContext hook: requests can then mark
// their connection as authenticated on.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitedConn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// markAuthenticated records that the request's connection carried an
// authenticated request: it is closed to make room only after the ones that
// never did.
func markAuthenticated(ctx context.Context) {
	c, ok := ctx.Value(connKey{}).(*limitedConn)
	if !ok {
		return
	}
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if !c.authorized {
		c.l.busyLocked(c) // it is busy anyway: its request runs
		c.authorized = true
	}
}

// connectionCap is want lowered, when the process's file descriptor limit
// is tighter, to leave a quarter of the descriptors (at least 64) to the
// store, MCP servers, peers and webhooks.
func connectionCap(want int, log *slog.Logger) int {
	limit, ok := openFileLimit()
	if !ok {
		return want
	}
	reserve := max(limit/4, 64)
	if limit <= reserve {
		return want
	}
	if allowed := limit - reserve; uint64(want) > allowed {
		log.Warn("server.max_connections is above what the open file limit allows; lowered",
			slog.Int("max_connections", want), slog.Uint64("open_file_limit", limit), slog.Uint64("lowered_to", allowed))
		return int(allowed)
	}
	return want
}

// maxStreamsPerConn bounds the concurrent streams of one HTTP/2 connection
// (Go's default is 250): with max_connections it bounds the handlers that
// run at once.
const maxStreamsPerConn = 100
