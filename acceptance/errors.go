package acceptance

import "errors"

// Errors Decide and NewGate return. Callers branch on them with errors.Is.
var (
	// ErrNoContract means no contract governs the skill, so nothing it returns may be committed.
	ErrNoContract = errors.New("no acceptance contract for skill")
	// ErrNotTerminal means the remote task has not reached a terminal state: there is nothing
	// to decide yet.
	ErrNotTerminal = errors.New("remote task is not in a terminal state")
	// ErrDuplicateSkill means two contracts govern the same skill.
	ErrDuplicateSkill = errors.New("two acceptance contracts for one skill")
)

// ErrInvalidContract is wrapped by every error [LoadContract] and [ParseContract] return for a
// contract that was read but is wrong; a missing file wraps [io/fs.ErrNotExist] instead.
var ErrInvalidContract = errors.New("invalid acceptance contract")

// ErrNotCommitted is returned by [Ledger.Get] for a delegation the ledger holds no entry for.
var ErrNotCommitted = errors.New("delegation not committed")
