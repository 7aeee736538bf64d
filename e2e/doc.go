// Package e2e holds the tests that run the built handoff binary as separate
// processes, with real clients (a2a-go's for 1.0 and 0.3, the JS SDK),
// webhook receivers and kill -9; it has no code of its own.
package e2e
