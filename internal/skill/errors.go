package skill

import (
	"errors"
	"fmt"

	"github.com/handoff-a2a/handoff/mcp"
)

// ErrApprovalRequired is wrapped by the error [Caps.Call] returns for a call
// the agent's policy sends to an approver. A [Program]'s executor yields it
// (or an error wrapping an [ApprovalRequiredError]) and stops: the task waits
// input-required with the approval request, and Execute runs again once an
// approver answers.
var ErrApprovalRequired = errors.New("the call needs an approval")

// ErrNoTools is returned by [Caps.Call] outside a [Program]'s Execute, or in
// an agent without MCP servers.
var ErrNoTools = errors.New("no governed tools here: Tools is for the Execute of a skill with executor: go, in an agent with mcp_servers")

// ErrNoDelegation is returned by [Caps.Delegate] outside a [Program]'s
// Execute, or in an agent without peers.
var ErrNoDelegation = errors.New("no delegation here: Delegate is for the Execute of a skill with executor: go, in an agent with peers")

// ApprovalRequiredError is the error [Caps.Call] returns for a call that
// needs an approval; it wraps [ErrApprovalRequired].
type ApprovalRequiredError struct {
	// Request is what the approver is shown and must answer for.
	Request *mcp.ApprovalRequest
}

func (e *ApprovalRequiredError) Error() string {
	return fmt.Sprintf("tool %s: %s", e.Request.Tool, ErrApprovalRequired)
}

func (e *ApprovalRequiredError) Unwrap() error { return ErrApprovalRequired }
