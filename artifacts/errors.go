package artifacts

import "errors"

var (
	// ErrUnknownArtifact means a chunk asked to be appended to an artifact
	// the [Assembler] has not started, or has already finished or dropped.
	ErrUnknownArtifact = errors.New("artifacts: append to an unknown artifact")

	// ErrTooLarge means content went over the size limit (see [WithMaxBytes]).
	ErrTooLarge = errors.New("artifacts: over the size limit")

	// ErrInvalidArtifact means an artifact or a chunk cannot be assembled or
	// hashed: no artifact id, no parts, or a part whose content would not
	// survive a JSON round trip.
	ErrInvalidArtifact = errors.New("artifacts: invalid artifact")

	// ErrInvalidDigest means a digest string is not "sha256:" followed by 64
	// lowercase hex digits. It is checked before any file is touched.
	ErrInvalidDigest = errors.New("artifacts: invalid digest")

	// ErrNotFound means the [Store] holds nothing under the digest.
	ErrNotFound = errors.New("artifacts: not found")

	// ErrCorrupt means a stored blob no longer hashes to its digest.
	ErrCorrupt = errors.New("artifacts: stored content does not match its digest")

	// ErrMismatch means an artifact the peer streamed whole differs from the
	// artifact of the same id in its final task, or is missing there: the
	// peer told two stories about one artifact.
	ErrMismatch = errors.New("artifacts: the streamed artifact differs from the final task's")
)
