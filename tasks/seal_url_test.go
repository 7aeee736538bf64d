package tasks_test

import (
	"testing"

	"github.com/handoff-a2a/handoff/tasks"
)

// TestMaskedURL: a URL's userinfo, query and fragment never show.
func TestMaskedURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://hooks.example.com/path":                  "https://hooks.example.com/path",
		"https://hooks.example.com/path?token=s3cret":     "https://hooks.example.com/path?***",
		"https://u:p@hooks.example.com:8443/a/b?x=1#frag": "https://***@hooks.example.com:8443/a/b?***",
		"https://u@hooks.example.com/":                    "https://***@hooks.example.com/",
		"https://hooks.example.com/p#frag":                "https://hooks.example.com/p",
		"https://hooks.example.com/p?":                    "https://hooks.example.com/p?***",
		"https://***@hooks.example.com/path?***":          "https://***@hooks.example.com/path?***",
		"://bad?token=s3cret":                             "(unparsable URL)",
	} {
		if got := tasks.MaskedURL(in); got != want {
			t.Errorf("MaskedURL(%q) = %q, want %q", in, got, want)
		}
	}
}
