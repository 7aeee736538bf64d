// Package redistest gives a test a key namespace of its own on the Redis
// the project's tests share (127.0.0.1:6379), and leaves that Redis as it
// was: the namespace's keys are deleted when the test ends. For the tests
// of the Redis store and of engines on it, it also starts Redis servers and
// Clusters of a test's own (server.go).
package redistest
