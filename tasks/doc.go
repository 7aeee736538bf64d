// Package tasks is Handoff's task engine: its implementation of a2a-go's
// [a2asrv.RequestHandler], the task state machine, and the durable event log
// behind them.
//
// # Flow
//
// A message arrives at [Engine.SendMessage] or [Engine.SendStreamingMessage].
// The engine starts the agent's [a2asrv.AgentExecutor] in its own goroutine
// and applies every event it yields to the task's current [Snapshot]
// (copy-on-write: a published snapshot is never changed), checks that the
// sequence is valid, and appends the event and the new snapshot to the
// [Store] in one write. Only then is the event published to the task's
// subscribers: streams, resubscribes and blocking callers all read the same
// committed log, so what a client sees has been stored.
//
// # Stores
//
// The engine declares the stores it consumes and imports none: [Store] is
// one interface for tasks, their event logs and their push configs, and
// [SharedStore] adds what replicas need to share one. Every read is checked
// against the task's [Owner]: another caller's task reads as [ErrNotFound].
// Two packages implement them: tasks/boltstore keeps them in a bbolt file
// with a write-ahead log in front (concurrent writers share one fsync), and
// tasks/redisstore keeps them in Redis (a Stream per task's log, one Lua
// script per append). A [Sealer], built by the agent and given to either,
// seals push secrets before they are stored.
//
// # Replicas
//
// Engines on one Redis namespace are replicas of one agent (see
// replica.go): each task runs on one replica under a lease it renews; a
// replica takes over the tasks whose lease expired; subscribers on any
// replica follow the task's Stream; a cancel reaches the replica running
// the task. On any other store an engine runs alone.
package tasks
