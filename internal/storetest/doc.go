// Package storetest checks that an implementation of [tasks.Store] behaves
// as the embedded reference does, the way testing/slogtest checks a
// slog.Handler: one suite, [Run], is called by each implementation's tests
// against a real backend.
//
// A store under test may also implement [Corrupter], so that the suite can
// damage stored records and check that reads answer [tasks.ErrCorrupt].
package storetest
