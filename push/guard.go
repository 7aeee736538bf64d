package push

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// maxRedirects is how many redirects a [Guard.Client] follows; a webhook has
// no reason to bounce a delivery further, and each hop is one more target to
// check.
const maxRedirects = 3

// special is one of the IANA special-purpose ranges (the IPv4 and IPv6
// Special-Purpose Address Registries) that are not globally reachable, or
// an IPv6 form that carries an IPv4 address. A push target may not reach
// one unless allow-listed.
type special struct {
	prefix netip.Prefix
	why    string // what an error calls an address in it
	// v4 extracts the IPv4 address a form carries: an address whose IPv4
	// address is refused is refused, named after it.
	v4 func(b [16]byte) netip.Addr
	// viaV4 marks a form that is as reachable as its IPv4 address (NAT64,
	// 6to4): refused only when that address is.
	viaV4 bool
	in    string // how a refusal of its IPv4 address names the form
}

func last4(b [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(b[12:])) }

// specials are checked in order, the first that contains an address
// deciding, so the smaller blocks come before the ones they are inside.
var specials = []special{
	{prefix: netip.MustParsePrefix("0.0.0.0/8"), why: "a \"this network\" address (unspecified)"},
	{prefix: netip.MustParsePrefix("10.0.0.0/8"), why: "a private address (RFC 1918)"},
	{prefix: netip.MustParsePrefix("100.64.0.0/10"), why: "a carrier-grade NAT address (RFC 6598)"},
	{prefix: netip.MustParsePrefix("127.0.0.0/8"), why: "a loopback address"},
	{prefix: netip.MustParsePrefix("169.254.0.0/16"), why: "a link-local address (where cloud metadata services answer)"},
	{prefix: netip.MustParsePrefix("172.16.0.0/12"), why: "a private address (RFC 1918)"},
	// Two of its addresses are global anycast (192.0.0.9, .10); a webhook has no use for them.
	{prefix: netip.MustParsePrefix("192.0.0.0/24"), why: "an IETF protocol assignments address (RFC 6890)"},
	{prefix: netip.MustParsePrefix("192.0.2.0/24"), why: "a documentation address (TEST-NET-1)"},
	{prefix: netip.MustParsePrefix("192.88.99.0/24"), why: "a 6to4 relay anycast address (deprecated, RFC 7526)"},
	{prefix: netip.MustParsePrefix("192.168.0.0/16"), why: "a private address (RFC 1918)"},
	{prefix: netip.MustParsePrefix("198.18.0.0/15"), why: "a benchmarking address (RFC 2544)"},
	{prefix: netip.MustParsePrefix("198.51.100.0/24"), why: "a documentation address (TEST-NET-2)"},
	{prefix: netip.MustParsePrefix("203.0.113.0/24"), why: "a documentation address (TEST-NET-3)"},
	{prefix: netip.MustParsePrefix("224.0.0.0/4"), why: "a multicast address"},
	{prefix: netip.MustParsePrefix("255.255.255.255/32"), why: "the limited broadcast address"},
	{prefix: netip.MustParsePrefix("240.0.0.0/4"), why: "a reserved address (240.0.0.0/4)"},

	{prefix: netip.MustParsePrefix("::/128"), why: "an unspecified address"},
	{prefix: netip.MustParsePrefix("::1/128"), why: "a loopback address"},
	// IPv4-compatible addresses are deprecated (RFC 4291) and used by no webhook.
	{prefix: netip.MustParsePrefix("::/96"), why: "an IPv4-compatible address (deprecated, RFC 4291)", v4: last4, in: ", IPv4-compatible"},
	// IPv4-mapped: written as a literal, a way around filters; reachable as its IPv4 address.
	{prefix: netip.MustParsePrefix("::ffff:0:0/96"), why: "an IPv4-mapped address (write the IPv4 address itself)", v4: last4, in: ", IPv4-mapped"},
	{prefix: netip.MustParsePrefix("64:ff9b::/96"), why: "a NAT64 address", v4: last4, viaV4: true, in: " behind NAT64"},
	{prefix: netip.MustParsePrefix("64:ff9b:1::/48"), why: "a local-use NAT64 address (RFC 8215)"},
	{prefix: netip.MustParsePrefix("100::/64"), why: "a discard-only address (RFC 6666)"},
	{prefix: netip.MustParsePrefix("100:0:0:1::/64"), why: "a dummy prefix address (RFC 9780)"},
	{prefix: netip.MustParsePrefix("2001::/32"), why: "a Teredo address (RFC 4380)"},
	// Some of its sub-blocks are global (AMT, AS112, ORCHIDv2, drones); none serves webhooks.
	{prefix: netip.MustParsePrefix("2001::/23"), why: "an IETF protocol assignments address (RFC 2928)"},
	{prefix: netip.MustParsePrefix("2001:db8::/32"), why: "a documentation address"},
	{prefix: netip.MustParsePrefix("2002::/16"), why: "a 6to4 address", v4: func(b [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(b[2:6])) }, viaV4: true, in: " in 6to4"},
	{prefix: netip.MustParsePrefix("3fff::/20"), why: "a documentation address (RFC 9637)"},
	{prefix: netip.MustParsePrefix("5f00::/16"), why: "a segment routing (SRv6) SID (RFC 9602)"},
	{prefix: netip.MustParsePrefix("fc00::/7"), why: "a unique local address (private IPv6)"},
	{prefix: netip.MustParsePrefix("fe80::/10"), why: "a link-local address"},
	{prefix: netip.MustParsePrefix("fec0::/10"), why: "a site-local address (deprecated, RFC 3879)"},
	{prefix: netip.MustParsePrefix("ff00::/8"), why: "a multicast address"},
}

// A Resolver looks up a host's addresses. *net.Resolver is one; tests pass
// their own so that nothing leaves the machine.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// A Guard keeps push deliveries away from the agent's own network (SSRF). A
// target must be https, and every address its host resolves to must be
// globally reachable: every range of the IANA IPv4 and IPv6 special-purpose
// registries that is not (loopback, private and ULA, link-local with the
// cloud metadata address, CGNAT, documentation, benchmarking, IETF protocol
// assignments, Teredo, discard-only, reserved, unspecified), multicast and
// site-local are refused. So are the IPv6 forms that carry a refused IPv4
// address (IPv4-mapped, IPv4-compatible, NAT64 64:ff9b::/96, 6to4
// 2002::/16); a literal IPv4-mapped or IPv4-compatible host is refused
// whatever it carries.
//
// The allow-list lifts these rules. A host name on it (matched exactly,
// case-insensitively) may be plain http and resolve anywhere. An IP or CIDR
// on it lets a URL whose host is that literal address (or its IPv4-mapped
// form) be plain http, and lets any https host resolve into it; it does
// not allow the NAT64, 6to4 or IPv4-compatible forms of its addresses. The
// zero allow-list, the default, allows nothing.
//
// A Guard is safe for concurrent use.
type Guard struct {
	names    map[string]bool
	nets     []netip.Prefix
	resolver Resolver
}

// NewGuard returns a Guard that allows the hosts, IPs and CIDRs in
// allowHosts (see [Guard]). An entry that is neither an IP nor a CIDR is a
// host name; ports are not part of an entry.
func NewGuard(allowHosts []string, opts ...GuardOption) *Guard {
	g := &Guard{names: make(map[string]bool), resolver: newGuardConfig(opts).resolver}
	for _, h := range allowHosts {
		h = normalHost(strings.Trim(strings.TrimSpace(h), "[]"))
		if p, err := netip.ParsePrefix(h); err == nil {
			g.nets = append(g.nets, p.Masked())
		} else if a, err := netip.ParseAddr(h); err == nil {
			a = a.Unmap()
			g.nets = append(g.nets, netip.PrefixFrom(a, a.BitLen()))
		} else if h != "" {
			g.names[h] = true
		}
	}
	return g
}

// CheckURL checks a push target when its config is created: the URL must be
// absolute http(s), https unless its host is allow-listed, and every address
// its host resolves to must be allowed. The error wraps [ErrTargetRefused]
// and names the host and the reason; it never repeats the URL, whose path or
// query may hold a secret.
//
// A check now says nothing about the addresses the host will have later:
// [Guard.Client] checks again at every dial.
func (g *Guard) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: not a URL", ErrTargetRefused)
	}
	listed, err := g.checkURLRules(u)
	if err != nil || listed {
		return err
	}
	if _, err := g.addrs(ctx, normalHost(u.Hostname())); err != nil {
		if !errors.Is(err, ErrTargetRefused) { // a config needs a host that resolves now
			return fmt.Errorf("%w: %w", ErrTargetRefused, err)
		}
		return err
	}
	return nil
}

// checkURLRules applies the rules that need no lookup: scheme, host present,
// "localhost" names, literal addresses. listed reports that the host is
// allow-listed, so nothing else needs checking.
func (g *Guard) checkURLRules(u *url.URL) (listed bool, err error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return false, fmt.Errorf("%w: scheme %q (want https)", ErrTargetRefused, u.Scheme)
	}
	host := normalHost(u.Hostname())
	if host == "" {
		return false, fmt.Errorf("%w: the URL has no host", ErrTargetRefused)
	}
	if g.hostListed(host) {
		return true, nil
	}
	if scheme != "https" {
		return false, fmt.Errorf("%w: host %s: plain http is only allowed to allow-listed hosts", ErrTargetRefused, host)
	}
	// RFC 6761: these names are loopback whatever a resolver says.
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return false, fmt.Errorf("%w: host %s is a loopback name", ErrTargetRefused, host)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if why := g.refusal(a); why != "" {
			return false, fmt.Errorf("%w: host %s is %s", ErrTargetRefused, host, why)
		}
	}
	return false, nil
}

// addrs resolves host and returns its addresses if every one is allowed.
// A failed lookup is not a refusal (it does not wrap [ErrTargetRefused]):
// at dial time it may be transient, and the delivery worth retrying.
func (g *Guard) addrs(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		if why := g.refusal(a); why != "" {
			return nil, fmt.Errorf("%w: host %s is %s", ErrTargetRefused, host, why)
		}
		return []netip.Addr{a}, nil
	}
	ips, err := g.resolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("host %s does not resolve: %w", host, err)
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("host %s has no address", host)
	}
	listed := g.hostListed(host)
	out := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		a, ok := netip.AddrFromSlice(ip.IP)
		if !ok {
			return nil, fmt.Errorf("%w: host %s resolves to a malformed address", ErrTargetRefused, host)
		}
		a = a.Unmap().WithZone(ip.Zone) // net.IP holds IPv4 in 16 bytes
		// One refused address refuses the host: a dial could pick it.
		if why := g.refusal(a); why != "" && !listed {
			return nil, fmt.Errorf("%w: host %s resolves to %s, %s", ErrTargetRefused, host, a, why)
		}
		out = append(out, a)
	}
	return out, nil
}

// hostListed reports whether host (normalised) is allow-listed by name, or is
// a literal address inside an allow-listed IP or CIDR.
func (g *Guard) hostListed(host string) bool {
	if g.names[host] {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && g.netListed(a)
}

func (g *Guard) netListed(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, p := range g.nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// refusal says why a may not be reached, or "" if it may: it is
// allow-listed, or in no special range.
func (g *Guard) refusal(a netip.Addr) string {
	a = a.WithZone("")
	if g.netListed(a) {
		return ""
	}
	return specialWhy(a)
}

// specialWhy says which special range a is in, or "". An IPv6 form that
// carries an IPv4 address is refused when that address is in one, whatever
// the allow-list: allowing 127.0.0.1 allows neither its 6to4 nor its NAT64
// form, which reach other machines.
func specialWhy(a netip.Addr) string {
	for _, s := range specials {
		if !s.prefix.Contains(a) {
			continue
		}
		if s.v4 != nil {
			if why := specialWhy(s.v4(a.As16())); why != "" {
				return why + s.in
			}
			if s.viaV4 {
				return ""
			}
		}
		return s.why
	}
	return ""
}

// normalHost lower-cases a host name and drops the trailing dot of a fully
// qualified name, so "Hooks.Example." and "hooks.example" are one host.
func normalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// Client returns an HTTP client for deliveries, with timeout for each whole
// request. Every request it sends, redirects included, must pass the URL
// rules of [Guard.CheckURL]; every connection is dialled to an address the
// Guard resolved and checked at that moment, so a host that resolved to a
// public address at config time and to a private one now (DNS rebinding) is
// refused before a packet leaves. It follows at most 3 redirects and uses no
// proxy: through a proxy, the dial check would see the proxy's address, not
// the target's.
func (g *Guard) Client(timeout time.Duration) *http.Client {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Proxy: nil, // never from the environment: see above
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return g.dial(ctx, dialer, network, addr)
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   100, // many webhooks on one host each keep their connection (the default, 2, redials)
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport: &guardedTransport{guard: g, base: transport},
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return fmt.Errorf("%w: more than %d redirects", ErrTargetRefused, maxRedirects)
			}
			return nil
		},
	}
}

// dial connects to addr through the Guard: it resolves the host itself and
// dials only checked addresses, so what was checked is what is connected to.
func (g *Guard) dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: address %q: %w", ErrTargetRefused, addr, err)
	}
	addrs, err := g.addrs(ctx, normalHost(host))
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// guardedTransport applies the URL rules to every request, the first one
// and each redirect, before the transport dials.
type guardedTransport struct {
	guard *Guard
	base  *http.Transport
}

func (t *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, err := t.guard.checkURLRules(req.URL); err != nil {
		if req.Body != nil {
			req.Body.Close() // RoundTrip must close the body, even on error
		}
		return nil, err
	}
	return t.base.RoundTrip(req)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// pooled connections.
func (t *guardedTransport) CloseIdleConnections() { t.base.CloseIdleConnections() }
