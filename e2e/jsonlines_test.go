package e2e

import "strings"

// jsonArray turns the --json output of a handoff command that lists
// records, one JSON object a line, into one JSON array to decode.
func jsonArray(out string) []byte {
	return []byte("[" + strings.Join(strings.Split(strings.TrimSpace(out), "\n"), ",") + "]")
}
