// Package record is the stored form of a task snapshot that the embedded
// and the Redis store share (the JSON of [Task], an owner's index key) and
// its one-pass decoder. It imports neither store's library.
package record
