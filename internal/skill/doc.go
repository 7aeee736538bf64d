// Package skill holds the agent's built-in executors, the ones a skill's
// `executor` in the config names, each an [a2asrv.AgentExecutor] in a file
// of its own:
//
//   - [Tool] (`executor: mcp`): one MCP tool through the governed pipeline,
//     with approvals and redaction;
//   - [Delegate] (`executor: delegate`): a verified peer through the envelope,
//     the durable follow and the acceptance gate, recorded in the ledger;
//   - [Program] (`executor: go`): a program's own executor, given the same
//     governed tools and delegations through [CapsFrom];
//   - [Model] (`executor: model`): a model loop (internal/model) over the
//     MCP catalog and the delegate skills, each call through the same roads
//     as a program's ([Caps.Call], [Caps.Delegate]), its conversation kept
//     in a [State] ([BoltState], [RedisState]) out of the task's sight, its
//     result gated by an output contract and [ApprovalWhen];
//   - [Output]: the same output gate around a Tool, Program or Delegate
//     (`output:` and `approval_when:` on their skills), its waiting result
//     kept in the [State];
//
// and the [Router], the engine's one executor, which hands each task to the
// executor of its skill. The conformance executor lives in internal/tck.
//
// The package knows nothing of the agent's config: the root package builds
// each executor from it ([DelegateSpec], [MCP], [Outbound]).
package skill
