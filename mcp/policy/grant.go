package policy

import (
	"fmt"
	"time"
)

// Scope is how far a [Grant] reaches.
type Scope string

const (
	// ScopeOnce: one call, its arguments bound by the approval token. Not a stored grant:
	// the approval travels with the message that resumes the task.
	ScopeOnce Scope = "once"
	// ScopeTask: the tool's calls for the rest of one task.
	ScopeTask Scope = "task"
	// ScopeResource: the tool's calls by one principal on resources under a prefix, until an
	// expiry.
	ScopeResource Scope = "scope"
)

// Grant is an approval an approver gave for more than one call. It sits at [LayerGrant]:
// below every deny and every mandatory ask, so it never beats either.
type Grant struct {
	// ID names the grant; decisions it makes name "grant:ID".
	ID string `json:"id"`
	// Scope is task or scope.
	Scope Scope `json:"scope"`
	// Approver is who gave it.
	Approver string `json:"approver"`
	// Principal is the caller it is for; required.
	Principal string `json:"principal"`
	// TaskID, for a task grant, is the task it is for.
	TaskID string `json:"task_id,omitempty"`
	// Tool is the catalog name or path.Match glob it covers.
	Tool string `json:"tool"`
	// Resource, for a scope grant, is the canonical path or URL prefix every resource of the
	// call must lie under (an id must equal it); empty covers calls with no resources only.
	Resource string `json:"resource,omitempty"`
	// Created is when it was given.
	Created time.Time `json:"created"`
	// Expires is when it stops covering calls; required for a scope grant.
	Expires time.Time `json:"expires,omitzero"`
}

// Check reports what is wrong with g, or nil.
func (g Grant) Check() error {
	switch {
	case g.Principal == "":
		return fmt.Errorf("grant: no principal")
	case g.Tool == "":
		return fmt.Errorf("grant: no tool")
	}
	switch g.Scope {
	case ScopeTask:
		if g.TaskID == "" {
			return fmt.Errorf("grant: a task grant needs a task id")
		}
	case ScopeResource:
		if g.Expires.IsZero() {
			return fmt.Errorf("grant: a scope grant needs an expiry")
		}
	default:
		return fmt.Errorf("grant: scope %q is not task or scope", g.Scope)
	}
	return nil
}

// covers reports whether g lets c run (when nothing above the grant layer decided). A tool
// without a contract is never covered: its default is a deny, and a grant never beats one.
func (g *Grant) covers(c *Call) bool {
	if !c.Contracted || g.Principal != c.Principal || c.Principal == "" || !toolGlob(g.Tool, c.Tool) {
		return false
	}
	now := c.Now
	if now.IsZero() {
		now = time.Now()
	}
	if !g.Expires.IsZero() && !now.Before(g.Expires) {
		return false
	}
	switch g.Scope {
	case ScopeTask:
		return g.TaskID != "" && g.TaskID == c.TaskID
	case ScopeResource:
		for _, r := range c.Resources {
			ok := false
			switch r.Kind {
			case KindPath:
				ok = g.Resource != "" && pathUnder(g.Resource, r.Value)
			case KindURL:
				ok = g.Resource != "" && urlUnder(g.Resource, r.Value)
			case KindID:
				ok = g.Resource == r.Value
			}
			if !ok {
				return false
			}
		}
		return true
	}
	return false
}
