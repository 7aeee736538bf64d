package good

import "errors"

// A Thing is documented field by field.
type Thing struct {
	// Name names it.
	Name string
	Size int // Size is trailing-documented.
	// Inner is a nested struct.
	Inner struct {
		// Depth is documented too.
		Depth int
		depth int
	}
	hidden int
}

type internal struct{ Loud int }

// New returns a Thing; a local errors.New is not a sentinel.
func New() (*Thing, error) { return nil, errors.New("not yet") }
