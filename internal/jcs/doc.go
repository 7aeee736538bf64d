// Package jcs is Handoff's RFC 8785 (JSON Canonicalization Scheme) writer:
// the one that the tool pipeline's digests (mcp) and the card signatures
// (agentcard) are made with. [Append] writes any value as
// Transform(json.Marshal(v)) of github.com/gowebpki/jcs would;
// [AppendCopies] does the same and returns the decoded forms of what it
// wrote; [AppendPruned] writes the payload the A2A SDKs sign, empty values
// dropped. Numbers are formatted by gowebpki/jcs (NumberToJSON).
//
// It is written by hand because the JCS libraries for Go (gowebpki/jcs,
// cyberphone's json-canonicalization) only transform JSON text: the values
// Handoff canonicalises are decoded ones, and going through the libraries
// means encoding them and parsing the text again. On a card that round trip
// takes 5 to 12 times as long as AppendPruned, with 481 allocations against
// 5 (BenchmarkAppendPruned, 2 busy cores), and a tool call's arguments need
// their decoded forms as well, which here come out of the same pass. The
// tests and fuzz targets hold every function here to gowebpki/jcs's results.
package jcs
