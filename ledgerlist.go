package handoff

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/internal/a2ahttp"
	"github.com/handoff-a2a/handoff/internal/auth"
	"github.com/handoff-a2a/handoff/internal/skill"
	"github.com/handoff-a2a/handoff/tasks"
)

// delegationsList answers GET /a2a/delegations: the delegations of the
// caller's own tasks, or every one for an approver.
func (a *Agent) delegationsList(w http.ResponseWriter, r *http.Request) {
	if a.del == nil {
		writeRESTError(w, http.StatusNotFound, "NOT_FOUND", "UNSUPPORTED_OPERATION", "this agent delegates no skill")
		return
	}
	list, err := a.del.ledger.Delegations(r.Context())
	if err != nil {
		a.log.Error("delegations list", slog.Any("error", err))
		http.Error(w, "the delegations could not be read", http.StatusInternalServerError)
		return
	}
	sees := a.seesDelegation(r)
	out := []*acceptance.Delegation{}
	for _, d := range list {
		if sees(d.TaskID) {
			out = append(out, d)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"delegations": out})
}

// ledgerList answers GET /a2a/ledger ("handoff ledger URL"): the commits
// of the caller's own delegations, or every one for an approver, newest
// first; ?limit=N keeps the newest N the caller may see.
func (a *Agent) ledgerList(w http.ResponseWriter, r *http.Request) {
	if a.del == nil {
		writeRESTError(w, http.StatusNotFound, "NOT_FOUND", "UNSUPPORTED_OPERATION", "this agent delegates no skill, so no ledger")
		return
	}
	limit := 0
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			writeRESTError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "INVALID_LIMIT", "limit must be a count of entries, 0 for all")
			return
		}
		limit = n
	}
	// All of them: the limit applies to what this caller may see, which
	// only the owner check tells.
	entries, err := a.del.ledger.List(r.Context(), 0)
	if err != nil {
		a.log.Error("ledger list", slog.Any("error", err))
		http.Error(w, "the ledger could not be read", http.StatusInternalServerError)
		return
	}
	sees := a.seesDelegation(r)
	out := []*acceptance.Entry{}
	for _, e := range entries {
		if limit > 0 && len(out) == limit {
			break
		}
		if sees(e.DelegationID) {
			out = append(out, e)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"entries": out})
}

// seesDelegation tells whether the caller of r may see a delegation, its
// record in GET /a2a/delegations or its ledger entry, by the delegation's
// id: an approver sees every one, another caller those of the tasks it
// owns, the task that made the delegation (skill.TaskOfDelegation).
func (a *Agent) seesDelegation(r *http.Request) func(id string) bool {
	p, authenticated := auth.PrincipalFrom(r.Context())
	if authenticated && a.isApprover(p.Name) { // the current list: a reload may have changed it
		return func(string) bool { return true }
	}
	want := tasks.Owner{Principal: tasks.AnonymousPrincipal}
	if authenticated {
		want = tasks.Owner{Principal: "user:" + p.Name, Tenant: p.Tenant}
	}
	return func(id string) bool {
		o, err := a.store.OwnerOf(r.Context(), skill.TaskOfDelegation(id))
		return err == nil && o.Principal == want.Principal && (want.Tenant == "" || o.Tenant == want.Tenant)
	}
}

// writeRESTError is [a2ahttp.WriteRESTError], for the handlers of the
// agent's own routes (ledger, audit, delegations, blobs).
func writeRESTError(w http.ResponseWriter, status int, grpcStatus, reason, msg string) {
	a2ahttp.WriteRESTError(w, status, grpcStatus, reason, msg)
}
