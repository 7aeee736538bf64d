package agentcard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/jcs"
)

// CanonicalPayload returns the bytes a card signature covers: the RFC 8785
// (JCS) form of the card's A2A 1.0 members, without "signatures", after
// dropping empty values the way the official Python and JS SDKs do.
//
// The rule, step by step:
//
//  1. Take the members of the 1.0 AgentCard message, in their JSON names, as
//     json.Marshal of [a2a.AgentCard] writes them. No 0.3 member (url,
//     preferredTransport, protocolVersion, additionalInterfaces, security)
//     is ever part of the payload.
//  2. Remove "signatures".
//  3. Write security requirement scopes in their 1.0 protobuf JSON form,
//     {"schemes":{"name":{"list":[...]}}}; a2a-go writes a bare list there.
//  4. Drop, recursively, every null, empty string, empty list and empty
//     object, and then every list or object that became empty. false and 0
//     stay. This is what a2a-python (helpers.canonicalize_agent_card) and
//     @a2a-js/sdk (canonicalizeAgentCard) do before canonicalising. It
//     differs from the example in the spec (section 8.4.1), which keeps
//     REQUIRED members such as an empty description; the SDKs are what
//     verifies cards in practice, so Handoff signs what they check.
//  5. Canonicalise with JCS.
//
// a2a-go cannot tell an unset capability from one set to false, and writes
// neither; the payload therefore never holds a false capability. [Verifier]
// also accepts cards signed with explicit false capabilities, and payloads
// written with non-ASCII characters escaped, as Python's json.dumps does.
func CanonicalPayload(card *a2a.AgentCard) ([]byte, error) {
	tree, err := cardTree(card)
	if err != nil {
		return nil, err
	}
	return canonicalize(tree)
}

// cardTree is the card as generic JSON after steps 1 to 3 of the rule.
func cardTree(card *a2a.AgentCard) (map[string]any, error) {
	if card == nil {
		return nil, fmt.Errorf("%w: nil card", ErrMalformed)
	}
	b, err := json.Marshal(card)
	if err != nil {
		return nil, fmt.Errorf("%w: encode card: %w", ErrMalformed, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // numbers (extension params) reach JCS as written, not as float64 text
	var tree map[string]any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("%w: decode card: %w", ErrMalformed, err)
	}
	delete(tree, "signatures")
	wrapScopes(tree["securityRequirements"])
	if skills, ok := tree["skills"].([]any); ok {
		for _, s := range skills {
			if s, ok := s.(map[string]any); ok {
				wrapScopes(s["securityRequirements"])
			}
		}
	}
	return tree, nil
}

// wrapScopes rewrites a2a-go's {"schemes":{"name":[...]}} as the protobuf
// StringList form {"schemes":{"name":{"list":[...]}}}.
func wrapScopes(reqs any) {
	list, ok := reqs.([]any)
	if !ok {
		return
	}
	for _, r := range list {
		r, ok := r.(map[string]any)
		if !ok {
			continue
		}
		schemes, ok := r["schemes"].(map[string]any)
		if !ok {
			continue
		}
		for name, scopes := range schemes {
			schemes[name] = map[string]any{"list": scopes}
		}
	}
}

// canonicalize applies steps 4 and 5 of the rule to a tree.
func canonicalize(tree map[string]any) ([]byte, error) {
	out, err := jcs.AppendPruned(make([]byte, 0, 1024), tree)
	if err != nil {
		return nil, fmt.Errorf("%w: canonicalize: %w", ErrMalformed, err)
	}
	if len(out) == 0 {
		return []byte("{}"), nil // @a2a-js/sdk's answer for a card with nothing left
	}
	return out, nil
}

// presenceCapabilities are the AgentCapabilities members declared `optional`
// in the 1.0 proto: a proto-based signer that set one to false writes it.
var presenceCapabilities = []string{"streaming", "pushNotifications", "extendedAgentCard"}

// altPayloads returns the other payloads a legitimate signer may have covered
// for the same card, primary excluded: every combination of explicit false
// for the capabilities the card leaves false, and each payload (primary
// included) with non-ASCII escaped as Python's json.dumps writes it. At most
// 15, computed only after the primary payload failed.
func altPayloads(card *a2a.AgentCard, primary []byte) ([][]byte, error) {
	var out [][]byte
	add := func(p []byte) {
		for _, q := range out {
			if bytes.Equal(p, q) {
				return
			}
		}
		if !bytes.Equal(p, primary) {
			out = append(out, p)
		}
	}
	addBoth := func(p []byte) {
		add(p)
		if a := asciiEscape(p); a != nil {
			add(a)
		}
	}
	addBoth(primary)

	tree, err := cardTree(card)
	if err != nil {
		return nil, err
	}
	caps, _ := tree["capabilities"].(map[string]any)
	var unset []string
	for _, name := range presenceCapabilities {
		if _, ok := caps[name]; !ok {
			unset = append(unset, name)
		}
	}
	for mask := 1; mask < 1<<len(unset); mask++ {
		variant := make(map[string]any, len(caps)+len(unset))
		for k, v := range caps {
			variant[k] = v
		}
		for i, name := range unset {
			if mask&(1<<i) != 0 {
				variant[name] = false
			}
		}
		tree["capabilities"] = variant
		p, err := canonicalize(tree)
		if err != nil {
			return nil, err
		}
		addBoth(p)
	}
	return out, nil
}

// asciiEscape rewrites every character from U+007F up as \uXXXX (a UTF-16
// surrogate pair above U+FFFF), lower-case hex, as Python's json.dumps does
// with its default ensure_ascii. It returns nil when p is already ASCII.
// Outside strings JCS output is ASCII, so rewriting the whole text is safe.
func asciiEscape(p []byte) []byte {
	i := bytes.IndexFunc(p, func(r rune) bool { return r >= 0x7f })
	if i < 0 {
		return nil
	}
	out := make([]byte, 0, len(p)+len(p)/2)
	out = append(out, p[:i]...)
	for _, r := range string(p[i:]) {
		switch {
		case r < 0x7f:
			out = append(out, byte(r))
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			out = appendU(appendU(out, hi), lo)
		default:
			out = appendU(out, r)
		}
	}
	return out
}

func appendU(b []byte, r rune) []byte {
	b = append(b, `\u`...)
	h := strconv.FormatInt(int64(r), 16)
	for range 4 - len(h) {
		b = append(b, '0')
	}
	return append(b, h...)
}
