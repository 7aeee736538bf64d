// Package artifacts assembles, hashes and stores the artifacts peers send
// back, so that evidence can name an artifact by a digest that cannot lie.
//
// # Flow
//
// A peer streams an artifact as [a2a.TaskArtifactUpdateEvent] chunks. An
// [Assembler], one per task stream, puts them together by artifact id
// (append, lastChunk) and returns each finished artifact. [Digest] names it
// by the SHA-256 of the RFC 8785 canonical JSON of its parts, a name that
// survives any JSON round trip. A [Store] keeps the canonical JSON on disk
// under that name and checks the name again on every read, so a changed
// file is reported as [ErrCorrupt], never returned. Large raw content goes
// to the same Store as a streamed blob ([Store.PutRaw], [Store.OpenRaw]).
//
// A [Collector] does all of this for one peer task as its stream arrives,
// without holding the artifacts: it writes and hashes each one's canonical
// JSON chunk by chunk, a large one into a temp file of the Store, and at
// the end holds the stream to the peer's final task: the final task
// counts (after a restart it is all there is), and an artifact streamed
// whole that it contradicts is [ErrMismatch].
//
// # Limits
//
// Every stage is bounded ([WithMaxBytes], 16 MiB by default) and refuses
// more with [ErrTooLarge]: a peer decides what it sends, not how much of it
// we hold.
package artifacts
