package console

import "errors"

// ErrNoApproval is returned by [Approvals.Decide] when the task waits for
// no approval the caller may answer.
var ErrNoApproval = errors.New("the task waits for no approval this caller may answer")
