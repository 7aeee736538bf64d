package model

import (
	"encoding/json"
)

// Mode is how the model sees the visible tools, chosen once per task.
type Mode string

const (
	// ModeAll: every visible tool is offered with its full schema.
	ModeAll Mode = "all"
	// ModeSearch: the visible set is over the schema budget; the model gets search_tools and
	// call_tool instead.
	ModeSearch Mode = "search"
)

// Role is a chat message's author.
type Role string

// The Chat Completions roles the loop writes.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one chat message as the loop stores it. It is converted to the wire format on
// every request, so the stored form does not depend on the client library.
type Message struct {
	// Role is who wrote the message.
	Role Role `json:"role"`
	// Content is its text: the instructions, the user's input, the model's answer, or a tool
	// message's rendered [Observation].
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message proposes.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID correlates a tool message with the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// ToolCall is one call the model proposed: its id, the tool's name and the arguments exactly
// as the model wrote them.
type ToolCall struct {
	// ID is the model's id for the call; the tool message that answers it carries it.
	ID string `json:"id"`
	// Name is the tool the model named, visible or not.
	Name string `json:"name"`
	// Arguments are the arguments' JSON text as the model wrote it, not yet parsed.
	Arguments string `json:"arguments"`
}

// Visibility records why one tool is visible to this task.
type Visibility struct {
	// Name is the visible tool's name.
	Name string `json:"name"`
	// Reason says which of the skill's tools globs or delegates made it visible.
	Reason string `json:"reason"`
}

// CallRecord is what became of one proposed call.
type CallRecord struct {
	// ID is the model's tool call id ([ToolCall.ID]).
	ID string `json:"id"`
	// Turn is the model round trip, counted from 1, that proposed the call.
	Turn int `json:"turn"`
	// Name is the tool the call named (for call_tool, the tool it wrapped).
	Name string `json:"name"`
	// Arguments are the arguments after coercion, when they parsed.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Started: a non-read call was handed to the caller (saved before it ran).
	Started bool `json:"started,omitempty"`
	// Outcome is set once the call has ended, whoever ended it (the loop's refusal or the
	// caller's pipeline). A call with an outcome is never run again.
	Outcome *Observation `json:"outcome,omitempty"`
}

// Pending is a call waiting for an approval.
type Pending struct {
	// CallID is the waiting call's tool call id ([ToolCall.ID]).
	CallID string `json:"call_id"`
	// Tool is the tool the waiting call names (for call_tool, the tool it wraps).
	Tool string `json:"tool"`
	// Request is what the caller asked the approver (its approval_request), opaque here.
	Request json.RawMessage `json:"request,omitempty"`
}

// Conversation is a model skill's durable state: everything a Run needs to resume after a
// restart. It is plain JSON.
type Conversation struct {
	// Mode is decided by Start and never changes, so the tools the model is offered keep
	// their shape for the whole task.
	Mode Mode `json:"mode"`
	// Snapshot is the version of the catalog snapshot the last step resolved: Start sets it,
	// and every Run records the snapshot it plans against.
	Snapshot string `json:"snapshot"`
	// Visible is the visible set of the snapshot, with the reason for each tool.
	Visible []Visibility `json:"visible"`
	// Messages are the conversation so far: the instructions, the user's input, then the
	// model's turns and one tool message for each call.
	Messages []Message `json:"messages"`
	// Calls are what became of the proposed calls, in the order they were proposed.
	Calls []CallRecord `json:"calls,omitempty"`
	// Turns counts model round trips.
	Turns int `json:"turns"`
	// ToolCalls counts proposed calls of catalog tools and delegates (built-in tools are not
	// counted), for max_tool_calls.
	ToolCalls int `json:"tool_calls"`
	// Activated are the SKILL.md skills whose body is in Messages.
	Activated []string `json:"activated,omitempty"`
	// Pending is the call waiting for an approval; nil when none waits.
	Pending *Pending `json:"pending,omitempty"`
	// Result is the submit_result arguments waiting for the output gate.
	Result json.RawMessage `json:"result,omitempty"`
	// ResultCall is the tool call id of the submit_result call that holds Result: a
	// rejection answers it.
	ResultCall string `json:"result_call,omitempty"`
	// Rejections counts the gate's rejections sent back to the model (one at most before
	// [ErrNotCommitted]).
	Rejections int `json:"rejections,omitempty"`
}

// record returns the call record of id, or nil.
func (c *Conversation) record(id string) *CallRecord {
	for i := range c.Calls {
		if c.Calls[i].ID == id {
			return &c.Calls[i]
		}
	}
	return nil
}

// answered reports whether a tool message for id is in the conversation.
func (c *Conversation) answered(id string) bool {
	for _, m := range c.Messages {
		if m.Role == RoleTool && m.ToolCallID == id {
			return true
		}
	}
	return false
}

// visible reports whether name is in the visible set.
func (c *Conversation) visible(name string) bool {
	for _, v := range c.Visible {
		if v.Name == name {
			return true
		}
	}
	return false
}
