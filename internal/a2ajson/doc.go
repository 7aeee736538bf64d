// Package a2ajson writes a2a-go values (tasks, messages, artifacts, stream
// responses) in the JSON encoding/json makes of them, byte for byte, without
// its reflection and copies: the embedded store keeps its records in this
// form, and the A2A transports answer with the same writers.
package a2ajson
