package policy

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Kind is how a resource's text is made canonical.
type Kind string

const (
	// KindPath is a file path under the tool's root: cleaned, ".." resolved lexically (symlinks
	// are never followed: the policy reads no file system), relative to the root, and never
	// outside it.
	KindPath Kind = "path"
	// KindURL is an absolute http or https URL: scheme and host lowercased, the host in IDNA
	// ASCII form, default ports dropped, dot segments resolved, userinfo and fragment dropped.
	KindURL Kind = "url"
	// KindID is an opaque identifier, compared exactly.
	KindID Kind = "id"
)

// Resource is one canonical resource a call names, taken from its arguments by the tool's
// contract ([ResourceSpec]).
type Resource struct {
	// Kind says how Value was made canonical.
	Kind Kind `json:"kind"`
	// Pointer is the JSON pointer of the argument it came from.
	Pointer string `json:"pointer"`
	// Value is the canonical text every rule sees.
	Value string `json:"value"`
}

// ResourceSpec says where a tool's arguments name a resource: a contract's resources entry.
type ResourceSpec struct {
	// Pointer is an RFC 6901 JSON pointer into the arguments ("/path", "/files/0"). A pointer
	// at an array names each of its elements. An absent argument names no resource.
	Pointer string `yaml:"pointer" json:"pointer"`
	// Kind is path, url or id.
	Kind Kind `yaml:"kind" json:"kind"`
	// Root, for a path, is the absolute directory the tool resolves relative paths in; an
	// absolute argument must lie under it. Empty: the tool's root is "/", and absolute
	// arguments are taken relative to it.
	Root string `yaml:"root" json:"root,omitempty"`
}

// checkSpec reports what is wrong with a spec, or "".
func checkSpec(s ResourceSpec) string {
	if s.Pointer == "" || s.Pointer[0] != '/' {
		return fmt.Sprintf("pointer %q does not start with /", s.Pointer)
	}
	switch s.Kind {
	case KindPath:
		if s.Root != "" && !path.IsAbs(s.Root) {
			return fmt.Sprintf("root %q is not absolute", s.Root)
		}
	case KindURL, KindID:
		if s.Root != "" {
			return fmt.Sprintf("root is for path resources, not %s", s.Kind)
		}
	default:
		return fmt.Sprintf("unknown kind %q (want path, url or id)", s.Kind)
	}
	return ""
}

// CheckSpecs reports every problem with a contract's resource specs at once.
func CheckSpecs(specs []ResourceSpec) error {
	var errs []string
	for i, s := range specs {
		if p := checkSpec(s); p != "" {
			errs = append(errs, fmt.Sprintf("resources[%d]: %s", i, p))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// Extract takes the canonical resources specs name out of args (decoded JSON). A value that
// is not a string (or an array of strings), a path that leaves its root and a URL that does
// not parse are errors: a call whose resources cannot be read is not decided on a guess.
func Extract(specs []ResourceSpec, args map[string]any) ([]Resource, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	out := make([]Resource, 0, len(specs))
	for _, s := range specs {
		v, ok := lookupPointer(args, s.Pointer)
		if !ok || v == nil {
			continue
		}
		vals, isList := v.([]any)
		if !isList {
			vals = []any{v}
		}
		for _, e := range vals {
			text, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("resource %s: %T is not a string", s.Pointer, e)
			}
			canon, err := canonical(s, text)
			if err != nil {
				return nil, fmt.Errorf("resource %s: %w", s.Pointer, err)
			}
			out = append(out, Resource{Kind: s.Kind, Pointer: s.Pointer, Value: canon})
		}
	}
	return out, nil
}

func canonical(s ResourceSpec, text string) (string, error) {
	switch s.Kind {
	case KindPath:
		return CanonicalPath(s.Root, text)
	case KindURL:
		return CanonicalURL(text)
	default:
		return text, nil
	}
}

// lookupPointer resolves an RFC 6901 pointer in decoded JSON.
func lookupPointer(doc map[string]any, ptr string) (any, bool) {
	var cur any = doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) || (len(tok) > 1 && tok[0] == '0') {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// CanonicalPath returns p relative to root, cleaned, with ".." resolved lexically: "." for
// the root itself, otherwise a slash-separated path with no leading "/" or "..". A relative
// p is taken relative to root; an absolute p must lie under root (under "/" when root is
// empty). A path that would leave its root is an error, never clamped: the tool would read
// what it names, not what a clamped path names. CanonicalPath of its own result (with the
// same root, or relative) returns that result.
func CanonicalPath(root, p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path %q holds a NUL byte", p)
	}
	if path.IsAbs(p) {
		r := path.Clean("/" + root)
		c := path.Clean(p)
		switch {
		case r == "/":
			p = strings.TrimPrefix(c, "/")
		case c == r:
			p = "."
		case strings.HasPrefix(c, r+"/"):
			p = c[len(r)+1:]
		default:
			return "", fmt.Errorf("path %q is outside its root %s", p, r)
		}
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q leaves its root", p)
	}
	if c == "" {
		c = "."
	}
	return c, nil
}

// CanonicalURL returns the canonical form of an absolute http or https URL: the scheme and
// host lowercased, the host in IDNA ASCII form, the default port (80, 443) dropped, an empty
// path made "/", dot segments resolved (a trailing slash kept), and the userinfo and fragment
// dropped (rules see where a call goes, not who it claims to be). The query is kept as sent.
// HTTPS://Example.COM:443/a is https://example.com/a.
func CanonicalURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("url: %w", err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("url %q: scheme %q is not http or https", s, u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return "", fmt.Errorf("url %q has no host", s)
	}
	host, port := u.Hostname(), u.Port()
	if strings.Contains(host, ":") { // IPv6 literal: lowercase only
		host = "[" + strings.ToLower(host) + "]"
	} else {
		ascii, err := idna.Lookup.ToASCII(strings.TrimSuffix(host, "."))
		if err == nil && utf8.ValidString(host) {
			var again string // a name whose ASCII form is not one stays out: canonical means stable
			again, err = idna.Lookup.ToASCII(ascii)
			if again != ascii {
				err = fmt.Errorf("unstable")
			}
		}
		if err != nil || ascii == "" || !utf8.ValidString(host) || slices.Contains(strings.Split(ascii, "."), "") {
			return "", fmt.Errorf("url %q: host is not a valid name", s)
		}
		host = strings.ToLower(ascii)
	}
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return "", fmt.Errorf("url %q: bad port", s)
		}
		port = strconv.FormatUint(n, 10)
		if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
			port = ""
		}
	}
	p := u.Path
	if p == "" {
		p = "/"
	}
	cleaned := path.Clean("/" + p)
	if strings.HasSuffix(p, "/") && cleaned != "/" {
		cleaned += "/"
	}
	out := url.URL{Scheme: u.Scheme, Host: host, Path: cleaned, RawQuery: u.RawQuery}
	if port != "" {
		out.Host = host + ":" + port
	}
	return out.String(), nil
}
