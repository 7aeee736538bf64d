package skill_test

import (
	"testing"

	"github.com/handoff-a2a/handoff/internal/surfacetest"
)

// TestExportedFieldsDocumented: every exported field of an exported struct has its own doc.
func TestExportedFieldsDocumented(t *testing.T) { surfacetest.FieldsDocumented(t, ".") }

// TestOptionsAndErrorsInTheirFiles: options live in options.go, sentinels and error types
// in errors.go.
func TestOptionsAndErrorsInTheirFiles(t *testing.T) { surfacetest.InTheirFiles(t, ".") }
