package model

import (
	"encoding/json"
	"errors"
)

var (
	// ErrApprovalRequired is what a [Caller] returns (wrapped, or as an [*ApprovalError]) when
	// a call waits for an approver.
	ErrApprovalRequired = errors.New("the call needs an approval")
	// ErrMaxTurns: the model was still calling tools after max_turns round trips.
	ErrMaxTurns = errors.New("the model did not finish within max_turns")
	// ErrNoResult: a skill with an output schema got a text answer instead of submit_result.
	ErrNoResult = errors.New("the model answered without calling submit_result")
	// ErrNotCommitted: the output gate rejected the result after its reasons were sent back once.
	ErrNotCommitted = errors.New("not committed")
	// ErrNoChoices: the model answered with no choice to take.
	ErrNoChoices = errors.New("the model answered with no choices")
)

// ApprovalError is a call waiting for an approver.
type ApprovalError struct {
	// Request is what the caller asks the approver (its approval_request), opaque here; the
	// loop keeps it in [Pending.Request].
	Request json.RawMessage
}

func (e *ApprovalError) Error() string { return ErrApprovalRequired.Error() }

// Is makes errors.Is(err, ErrApprovalRequired) true.
func (e *ApprovalError) Is(target error) bool { return target == ErrApprovalRequired }

// FieldError is one config problem, named by its key relative to the struct validated
// ("base_url", "tools[1]"), so that the config loader can prefix the path and add the line.
type FieldError struct {
	// Field is the key, relative to the struct validated.
	Field string
	// Msg says what is wrong with it.
	Msg string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Msg }
