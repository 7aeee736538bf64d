// Package jcs holds the pieces of RFC 8785 (JSON Canonicalization Scheme)
// that Handoff's canonical writers share: string quoting, member order by
// UTF-16 code units, and the repair encoding/json makes to invalid UTF-8.
//
// The writers themselves stay with their users because their rules differ:
// mcp repairs invalid UTF-8 and builds decoded copies of the arguments while
// it writes them, agentcard refuses invalid UTF-8 and drops empty values as
// the A2A SDKs do before signing. Numbers are formatted by
// github.com/gowebpki/jcs (NumberToJSON) in both.
package jcs
