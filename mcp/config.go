package mcp

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
)

// Transport names how Handoff reaches an MCP server.
type Transport string

const (
	// TransportStdio runs the server as a child process and speaks over its stdin and stdout.
	TransportStdio Transport = "stdio"
	// TransportHTTP speaks the streamable HTTP transport to a URL.
	TransportHTTP Transport = "http"
)

// nameSep joins a server's name and a tool's name into the catalog name.
const nameSep = "__"

// ServerConfig describes one MCP server. The root package maps the agent's YAML onto it; this
// package reads no files.
type ServerConfig struct {
	// Name namespaces the server's tools (Name__tool). It must be non-empty, unique and free
	// of "__" so that a catalog name splits one way only.
	Name string
	// Transport is TransportStdio or TransportHTTP.
	Transport Transport

	// Command starts a stdio server, in its own process group. The server's stderr is
	// discarded.
	Command string
	// Args are Command's arguments, passed as they are, never expanded, so that secrets do
	// not land on a command line others can read.
	Args []string
	// Dir is the stdio server's working directory; empty means the agent's.
	Dir string
	// InheritEnv names the variables a stdio server inherits from the agent, besides PATH,
	// which it always inherits. Nothing else leaks through.
	InheritEnv []string
	// Env sets variables for a stdio server. ${VAR} in a value is replaced by the agent's
	// variable; a variable that is not set fails the connect rather than expanding to "".
	Env map[string]string

	// URL is the streamable HTTP endpoint of an http server.
	URL string
	// Headers are sent with every HTTP request, expanded like Env ("Bearer ${TOKEN}").
	Headers map[string]string

	// Allow filters the server's tools by their own (not namespaced) names with path.Match
	// globs. A tool is discoverable when it matches an Allow pattern, or Allow is empty, and
	// matches no Deny pattern. A filtered tool cannot be called.
	Allow []string
	// Deny names, by the same globs, tools that are never discoverable, whatever Allow says.
	Deny []string

	// ConnectTimeout bounds starting the server, the handshake and the first tool listing.
	// Zero means 10s.
	ConnectTimeout time.Duration
}

const defaultConnectTimeout = 10 * time.Second

func (c ServerConfig) connectTimeout() time.Duration {
	if c.ConnectTimeout > 0 {
		return c.ConnectTimeout
	}
	return defaultConnectTimeout
}

// validate reports every problem with c at once.
func (c ServerConfig) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("mcp server %q: "+format, append([]any{c.Name}, args...)...))
	}
	if c.Name == "" {
		bad("name is empty")
	}
	if strings.Contains(c.Name, nameSep) {
		bad("name contains %q", nameSep)
	}
	switch c.Transport {
	case TransportStdio:
		if c.Command == "" {
			bad("stdio transport needs a command")
		}
		if c.URL != "" || len(c.Headers) > 0 {
			bad("url and headers are for the http transport")
		}
	case TransportHTTP:
		if c.URL == "" {
			bad("http transport needs a url")
		}
		if c.Command != "" || len(c.Args) > 0 || len(c.Env) > 0 || len(c.InheritEnv) > 0 || c.Dir != "" {
			bad("command, args, dir and env are for the stdio transport")
		}
	default:
		bad("unknown transport %q (want %q or %q)", c.Transport, TransportStdio, TransportHTTP)
	}
	for _, p := range append(append([]string(nil), c.Allow...), c.Deny...) {
		if _, err := path.Match(p, ""); err != nil {
			bad("bad tool pattern %q: %v", p, err)
		}
	}
	if c.ConnectTimeout < 0 {
		bad("negative connect timeout")
	}
	return errors.Join(errs...)
}

// allows reports whether the filters let the server's tool name through.
func (c ServerConfig) allows(name string) bool {
	matches := func(patterns []string) bool {
		for _, p := range patterns {
			if ok, _ := path.Match(p, name); ok {
				return true
			}
		}
		return false
	}
	return (len(c.Allow) == 0 || matches(c.Allow)) && !matches(c.Deny)
}

// LookupEnv reads one variable of the agent's environment, as [os.LookupEnv] does.
type LookupEnv func(name string) (string, bool)

// expand replaces ${VAR} in s. Only the braced form is recognised, so a literal "$" in a
// header or a password survives; an unset variable is an error, not "".
func expand(s string, lookup LookupEnv) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("unterminated ${ in %q", s)
		}
		name := s[i+2 : i+j]
		v, ok := lookup(name)
		if !ok {
			return "", fmt.Errorf("environment variable %q is not set", name)
		}
		b.WriteString(s[:i])
		b.WriteString(v)
		s = s[i+j+1:]
	}
}

// environ builds a stdio server's whole environment: PATH, the inherited names, then Env.
func (c ServerConfig) environ(lookup LookupEnv) ([]string, error) {
	var env []string
	for _, name := range append([]string{"PATH"}, c.InheritEnv...) {
		if v, ok := lookup(name); ok {
			env = append(env, name+"="+v)
		}
	}
	for name, raw := range c.Env {
		v, err := expand(raw, lookup)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", name, err)
		}
		env = append(env, name+"="+v)
	}
	return env, nil
}
