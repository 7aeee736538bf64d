package a2ahttp

import (
	"bytes"
	"container/list"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ConnLimiter is a net.Listener that bounds the connections the server
// holds (make one with [LimitConnections]), in all (max) and per client address (perIP, 0: no bound), so that
// idle or slow clients run it out of neither file descriptors nor memory.
//
// At a bound, a new connection makes room by closing a spare one: a
// connection waiting for its first request or idle between requests,
// longest waiting first, and among those the ones that never carried an
// authenticated request before the ones that did. A busy connection (a
// request being read or answered) is never closed, nor one that has been
// spare, or last received bytes, for less than SpareGrace: net/http counts
// a connection busy only once it has read a request's header, so a request
// sent but not yet read would be lost with it. One exception: a connection
// never authenticated on that has had its answer and received nothing since
// is closable at once. Without it a flood that redials faster than
// max/SpareGrace keeps every connection inside its grace, and a new caller
// is refused for as long as the flood lasts; the flood now displaces its
// own answered connections, as fast as it comes. When no connection can be
// closed, the new one is answered 503 with Retry-After and closed at once,
// before any of it is read.
//
// A client address is its IP, an IPv6 one by its /64 (one host's share),
// an IPv4-mapped IPv6 one as the IPv4 address. Every Unix-socket peer has
// the same address: behind a proxy on a socket, max_connections_per_ip
// bounds the proxy's connections. So a flood of idle or unauthenticated
// connections only ever displaces itself, and a caller that authenticated
// on its keep-alive connection keeps it while the flood lasts. Closing an
// idle keep-alive connection is what its client is ready for (the server
// may close one at any time, RFC 9112 §9.6); refusing instead would have
// let a flood of idle connections shut out everyone else.
type ConnLimiter struct {
	// Listener is the listener whose connections are limited.
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

// LimitConnections wraps ln in a [ConnLimiter] holding at most max
// connections (lowered, with a warning, when the process's open file limit
// is tighter: see connectionCap) and perIP from one client address (0: no
// bound). The server must use the limiter's [ConnLimiter.ConnState] and
// [ConnLimiter.ConnContext] hooks.
func LimitConnections(ln net.Listener, max, perIP int, log *slog.Logger) *ConnLimiter {
	return newConnLimiter(ln, connectionCap(max, log), perIP, log)
}

// newConnLimiter wraps ln; see [ConnLimiter].
func newConnLimiter(ln net.Listener, max, perIP int, log *slog.Logger) *ConnLimiter {
	return &ConnLimiter{Listener: ln, max: max, perIP: perIP, log: log, byIP: map[string]int{}, refusing: make(chan struct{}, 64)}
}

// limitedConn is one connection the limiter counts.
type limitedConn struct {
	net.Conn
	l  *ConnLimiter
	ip string

	// lastRead is when bytes last arrived (UnixNano).
	lastRead atomic.Int64

	// Guarded by l.mu.
	idleSince  time.Time     // when it last became spare
	counted    bool          // in total and byIP
	waiting    *list.Element // in spare or trusted while it waits for a request
	authorized bool          // carried an authenticated request
	answered   bool          // a request on it ran (it went busy, then spare)
}

// SpareGrace is how long a connection that became spare, or received
// bytes, is kept from being closed to make room: a request sent on it but
// not yet read would be lost with it.
const SpareGrace = 250 * time.Millisecond

// Read implements net.Conn, and notes that bytes arrived.
func (c *limitedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
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
// room for, making room as [ConnLimiter] says.
func (l *ConnLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, l: l, ip: clientKey(c.RemoteAddr())}
		if l.admit(lc) {
			return lc, nil
		}
		l.refuse(c)
	}
}

// clientKey is the client address a connection from addr counts under:
// see [ConnLimiter].
func clientKey(addr net.Addr) string {
	var ap netip.AddrPort
	switch a := addr.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case nil:
		return ""
	default:
		var err error
		if ap, err = netip.ParseAddrPort(a.String()); err != nil {
			return a.String() // a Unix socket's peer: one key for all
		}
	}
	ip := ap.Addr().Unmap()
	if ip.Is6() {
		return netip.PrefixFrom(ip.WithZone(""), 64).Masked().String()
	}
	return ip.String()
}

// admit counts c in if there is room, or room can be made. The connections
// closed to make room are closed under l.mu, so none goes from spare to
// busy between being chosen and being closed (a request that arrives on
// it after it is chosen finds it closed, and its client retries elsewhere
// or sees the failure at once).
func (l *ConnLimiter) admit(c *limitedConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.warnLocked()
	now := time.Now()
	if l.perIP > 0 && l.byIP[c.ip] >= l.perIP {
		v := l.spareLocked(c.ip, now)
		if v == nil {
			l.refused++
			return false
		}
		l.evictLocked(v)
	}
	if l.total >= l.max {
		v := l.spareLocked("", now)
		if v == nil {
			l.refused++
			return false
		}
		l.evictLocked(v)
	}
	c.counted = true
	l.total++
	l.byIP[c.ip]++
	l.waitLocked(c)
	return true
}

// evictLocked uncounts v and closes it: its server goroutine sees its read
// fail and ends.
func (l *ConnLimiter) evictLocked(v *limitedConn) {
	l.dropLocked(v)
	_ = v.Conn.Close()
	l.made++
}

// spareLocked returns the connection to close first, from ip ("" any), or
// nil when none is closable: see [ConnLimiter].
func (l *ConnLimiter) spareLocked(ip string, now time.Time) *limitedConn {
	for _, q := range []*list.List{&l.spare, &l.trusted} {
		for e := q.Front(); e != nil; e = e.Next() {
			c := e.Value.(*limitedConn)
			if ip != "" && c.ip != ip {
				continue
			}
			lastRead := c.lastRead.Load()
			graced := now.Sub(c.idleSince) >= SpareGrace && now.Sub(time.Unix(0, lastRead)) >= SpareGrace
			// Answered and silent since: what it sent was read and
			// answered, so closing it loses no request.
			silent := !c.authorized && c.answered && lastRead < c.idleSince.UnixNano()
			if graced || silent {
				return c
			}
		}
	}
	return nil
}

// waitLocked queues c as spare: it waits for a request.
func (l *ConnLimiter) waitLocked(c *limitedConn) {
	if c.waiting != nil || !c.counted {
		return
	}
	c.idleSince = time.Now()
	if c.authorized {
		c.waiting = l.trusted.PushBack(c)
	} else {
		c.waiting = l.spare.PushBack(c)
	}
}

// busyLocked takes c out of the spare queues: a request runs on it.
func (l *ConnLimiter) busyLocked(c *limitedConn) {
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
func (l *ConnLimiter) dropLocked(c *limitedConn) {
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
func (l *ConnLimiter) warnLocked() {
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

// refuseHeadWait is how long a refused connection's request head is
// waited for before the 503 is written anyway.
const refuseHeadWait = 500 * time.Millisecond

// refuse answers c 503 and closes it, off the accept loop. The answer is
// written once the request's head has arrived (or refuseHeadWait passed):
// a client that reads an answer before it sent its request calls it
// unsolicited and fails the request (Go's, as "Unsolicited response
// received on idle HTTP channel") instead of reading the 503. What follows
// the head (a body) is read (a little, briefly) after the answer, so that
// closing the socket with it unread does not reset the connection before
// the client reads the 503.
func (l *ConnLimiter) refuse(c net.Conn) {
	select {
	case l.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refuseHeadWait))
		readHead(c, 16<<10)
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

// readHead reads from c until the end of an HTTP/1 request head (an empty
// line), at most limit bytes, or until a read fails.
func readHead(c net.Conn, limit int) {
	buf := make([]byte, 0, 4096)
	for len(buf) < limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := c.Read(buf[len(buf):cap(buf)])
		from := max(len(buf)-3, 0)
		buf = buf[:len(buf)+n]
		if bytes.Contains(buf[from:], []byte("\r\n\r\n")) || err != nil {
			return
		}
	}
}

// ConnState is the server's ConnState hook (http.Server.ConnState): it
// moves each connection between busy and spare.
func (l *ConnLimiter) ConnState(nc net.Conn, s http.ConnState) {
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
		c.answered = true // spare again only once its answer is written
	case http.StateHijacked, http.StateClosed:
		l.dropLocked(c)
	}
}

// connKey is the request context key of the connection a request came on.
type connKey struct{}

// ConnContext is the server's ConnContext hook (http.Server.ConnContext):
// requests can then mark their connection as authenticated on, which keeps
// it from being closed to make room before the ones never authenticated on.
func (*ConnLimiter) ConnContext(ctx context.Context, c net.Conn) context.Context {
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

// WarnPerIPBehindProxy logs (call it once, at start) that the per-address cap is on
// for an agent whose public URL is https: it is likely behind a reverse
// proxy, and then every caller has the proxy's address.
func WarnPerIPBehindProxy(log *slog.Logger, perIP int, publicURL string) {
	if perIP <= 0 || !strings.HasPrefix(strings.ToLower(publicURL), "https://") {
		return
	}
	log.Info("server.max_connections_per_ip is on and public_url is https, so the agent is likely behind a reverse proxy: "+
		"all connections from the proxy count under its one address; set server.max_connections_per_ip: 0 to turn the per-address cap off",
		slog.Int("max_connections_per_ip", perIP))
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

// MaxStreamsPerConn bounds the concurrent streams of one HTTP/2 connection
// (Go's default is 250; http.HTTP2Config.MaxConcurrentStreams): with the
// connection cap it bounds the handlers that run at once.
const MaxStreamsPerConn = 100
