// Package model runs a model-driven skill: an OpenAI-compatible Chat Completions conversation in
// which the model only proposes tool calls and the caller's governed pipeline decides.
//
// # Flow
//
// A [Loop] is built once per skill ([NewLoop]) and shared by its tasks; each call binds one
// task's [Env]: the [Catalog] as its caller may see it, the [Caller] that runs the governed
// pipeline for that caller, and the [Saver] of the task's state.
//
// [Loop.Start] resolves the catalog snapshot once, keeps the tools the skill's globs and
// delegates allow ([Visible], each with the reason it is visible) and chooses the mode for the
// whole task: every schema, or [ModeSearch] (search_tools and call_tool) when the schemas would
// exceed the skill's token budget. [Loop.Run] then alternates:
//
//	model turn ── Save ── for each proposed call: parse → coerce → validate → Caller.Call
//	                      → normalised [Observation] → one tool message ── Save ── next turn
//
// The [Conversation] is the durable state: it is saved after every model turn and after every
// tool outcome, so a Run over a reloaded Conversation resumes at the last stored step and never
// re-runs a call that already has an outcome. A non-read call is saved as started before it
// runs; one that was started but has no outcome (the process died during it) is passed again
// with [Call].Resumed set, under the same call id, for the caller's idempotency key. A call the caller answers with
// [ErrApprovalRequired] stops the run ([StatusNeedsApproval]); a later Run with the approval
// continues from that call. A skill with an output schema finishes through submit_result
// ([StatusSubmitted]); [Loop.Reject] sends a gate's reasons back once.
//
// The model's text never widens what is visible: search ranks only the visible set, an
// activated SKILL.md only adds text, and a call outside the visible set is refused as
// unavailable_tool.
//
// [Client] speaks Chat Completions through github.com/openai/openai-go/v3, whose own retry
// (429, 408, 409 and 5xx, honouring Retry-After and Retry-After-Ms) is used as is.
package model
