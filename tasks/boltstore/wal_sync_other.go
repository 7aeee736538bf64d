//go:build !linux

package boltstore

import "os"

// syncData makes f's written bytes durable.
func syncData(f *os.File) error { return f.Sync() }

// A dataSyncer makes a log segment's written bytes durable. Outside Linux it
// is f.Sync.
type dataSyncer struct{}

func newDataSyncer() *dataSyncer { return &dataSyncer{} }

func (*dataSyncer) sync(f *os.File) error { return syncData(f) }

func (*dataSyncer) close() {}
