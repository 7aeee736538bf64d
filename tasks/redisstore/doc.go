// Package redisstore is the task store that replicas of one agent share: a
// [tasks.SharedStore] in Redis (go-redis v9), with task snapshots in hashes,
// each task's event log in a Stream, leases for running tasks, the tails of
// logs and cancel requests between replicas, and the push delivery queue
// (a Stream with a consumer group) with each config's delivery state.
package redisstore
