// Package durable makes file system changes survive a crash. A file's own
// fsync makes its bytes durable but not its name: after creating, renaming
// or removing a file, [SyncDir] on its directory makes that change durable
// too. The artifact store and the embedded task store's write-ahead log call
// it after each such change.
package durable
