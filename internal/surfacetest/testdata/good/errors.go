package good

import "errors"

// ErrGone means the thing is gone.
var ErrGone = errors.New("gone")

// A LimitError carries the limit that was exceeded.
type LimitError struct {
	Limit int // Limit is the bound
}

func (e *LimitError) Error() string { return "over the limit" }
