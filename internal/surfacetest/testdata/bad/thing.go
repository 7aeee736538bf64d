package bad

import "errors"

// ErrMisplaced is a sentinel outside errors.go.
var ErrMisplaced = errors.New("misplaced")

// A Thing has fields a group comment covers only in part.
type Thing struct {
	// Name and Size say what and how big.
	Name, Other string
	Size        int
	Inner       struct {
		Depth int
	}
	*Embedded
}

// Embedded is embedded.
type Embedded struct{}

// An Option outside options.go.
type Option func()

// WithSize outside options.go, and silent on what happens without it.
func WithSize(int) Option { return nil }

// A ThingError outside errors.go.
type ThingError struct{}
