package mcp

import "errors"

// ErrAuditClosed is returned by Append and List on a closed [BoltAudit].
var ErrAuditClosed = errors.New("audit log closed")

// errServerDown is a supervisor's answer, while its server is unavailable or stopped, to a
// call that wants a session; the call ends as [OutcomeUnavailableTool].
var errServerDown = errors.New("server unavailable")

// ErrGrantNotFound is returned by [GrantStore.RevokeGrant] for an id no grant has.
var ErrGrantNotFound = errors.New("grant not found")
