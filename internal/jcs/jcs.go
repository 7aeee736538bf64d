package jcs

import "unicode/utf8"

// AppendString appends s, which must be valid UTF-8, quoted as RFC 8785
// section 3.2.2.2 says: only the quote, the backslash and the control
// characters are escaped, the five with short forms by them, the rest as
// \u00xx in lower case; everything else is written as is.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b >= 0x20 && b != '"' && b != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch b {
		case '"', '\\':
			dst = append(dst, '\\', b)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// compare orders strings by their UTF-16 code units, as RFC 8785 sorts
// member names; use it with slices.SortFunc. It differs from byte order only
// where a character above U+FFFF (a surrogate pair, 0xD800…) meets one in
// U+E000…U+FFFF.
func compare(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return int(utf16Key(ra)) - int(utf16Key(rb))
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// utf16Key is a rune's sort key among UTF-16 code units: its first unit,
// then (for a surrogate pair) its low surrogate, so two pairs with the same
// high surrogate still order.
func utf16Key(r rune) uint32 {
	if r < 0x10000 {
		return uint32(r) << 10
	}
	r -= 0x10000
	return (0xD800+uint32(r>>10))<<10 | uint32(r&0x3FF)
}

// ValidUTF8 replaces every byte of s that is not part of valid UTF-8 with
// U+FFFD, one per byte, as encoding/json does when it sends a string. It
// returns s itself when s is valid.
func ValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, s[i:i+size]...)
		}
		i += size
	}
	return string(out)
}
