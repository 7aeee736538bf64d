package handoff

import (
	"errors"

	"github.com/handoff-a2a/handoff/internal/skill"
	"github.com/handoff-a2a/handoff/mcp"
)

// ErrNoConfig is wrapped by [LoadConfig] when the file does not exist.
var ErrNoConfig = errors.New("config file not found")

// ErrApprovalRequired is wrapped by the error [ToolSet.Call] returns for a
// call the agent's policy sends to an approver. An executor yields it (or
// an error wrapping it) and stops: the task waits input-required with the
// approval request, and Execute runs again once an approver answers.
var ErrApprovalRequired = skill.ErrApprovalRequired

// ErrNoTools is returned by a [ToolSet] outside a Go executor's Execute, or
// in an agent without MCP servers.
var ErrNoTools = skill.ErrNoTools

// ErrNoDelegation is returned by [Delegate] outside a Go executor's
// Execute, or in an agent without peers.
var ErrNoDelegation = skill.ErrNoDelegation

// ApprovalRequiredError is the error [ToolSet.Call] returns for a call that
// needs an approval; it wraps [ErrApprovalRequired].
type ApprovalRequiredError struct {
	// Request is what the approver is shown and must answer for.
	Request *mcp.ApprovalRequest
}

func (e *ApprovalRequiredError) Error() string { return e.unwrapped().Error() }

// Unwrap reaches [ErrApprovalRequired], through the error the Go executor's
// runner turns into the task's input-required status with e.Request.
func (e *ApprovalRequiredError) Unwrap() error { return e.unwrapped() }

func (e *ApprovalRequiredError) unwrapped() *skill.ApprovalRequiredError {
	return &skill.ApprovalRequiredError{Request: e.Request}
}
