package policy

import "fmt"

// FieldError is one problem with one rule.
type FieldError struct {
	// Index is the rule's place in the list given to [New].
	Index int
	// Field is the rule's field at fault ("tools", "when").
	Field string
	// Msg says what is wrong.
	Msg string
}

// Error reads "rules[3].when: ...".
func (e *FieldError) Error() string { return fmt.Sprintf("rules[%d].%s: %s", e.Index, e.Field, e.Msg) }
