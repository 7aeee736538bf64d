// Package boltstore is the embedded task store: a [tasks.Store] in one
// bbolt file in the agent's data directory, with Handoff's own write-ahead
// log in front of it (wal.go). Concurrent writers share one fsync of the
// log (group commit) and bbolt takes their writes up in the background;
// [Open] replays what the log holds that the file does not, drops the end
// of a write a crash cut short, and refuses any other damage with a reason.
// [Recover] is the repair the CLI's "store recover" runs on a log that was
// refused. The push delivery state of each config lives here too, beside
// the config.
package boltstore
