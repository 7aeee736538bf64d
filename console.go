package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/a2ahttp"
	"github.com/handoff-a2a/handoff/internal/auth"
	"github.com/handoff-a2a/handoff/internal/console"
	"github.com/handoff-a2a/handoff/internal/skill"
	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/tasks"
)

// ConsoleConfig is the operator console at /console.
type ConsoleConfig struct {
	// Enabled serves the console. Default true.
	Enabled *bool `yaml:"enabled"`
	// SessionTTL is how long a sign-in lasts. Default 8h; at least 1m.
	SessionTTL *Duration `yaml:"session_ttl"`
}

// enabled reports whether the console is served.
func (c ConsoleConfig) enabled() bool { return c.Enabled == nil || *c.Enabled }

// routeConsole mounts the console (unless the config turns it off) and
// GET /a2a/approvals, the list "handoff approvals" reads, on mux.
func (a *Agent) routeConsole(mux *http.ServeMux, base string, face *a2ahttp.Face) {
	mux.Handle("GET /a2a/approvals", face.Authenticated(http.HandlerFunc(a.approvalsList)))
	if !a.cfg.Console.enabled() {
		return
	}
	ttl := 8 * time.Hour
	if a.cfg.Console.SessionTTL != nil {
		ttl = a.cfg.Console.SessionTTL.Duration
	}
	reports := map[string]http.Handler{
		"push":        http.HandlerFunc(a.pushStatus),
		"audit":       http.HandlerFunc(a.auditList),
		"delegations": http.HandlerFunc(a.delegationsList),
		"ledger":      http.HandlerFunc(a.ledgerList),
		"peers":       http.HandlerFunc(a.peersReport),
		"mcp":         http.HandlerFunc(a.mcpReport),
	}
	c := console.New(console.Config{
		Tasks:        a.handler,
		Events:       consoleEvents{a.store},
		Approvals:    approvalDesk{a},
		Authenticate: a.authn.Authenticate,
		APIKeyHeader: a.cfg.Auth.APIKeyHeader,
		IsApprover:   a.isApprover,
		Reports:      reports,
		Blob:         http.HandlerFunc(a.blob),
		PushRetry:    http.HandlerFunc(a.pushRetry),
		// The cookie is Secure when browsers reach the agent over https: a
		// public_url of https (TLS ends at a proxy in front of us), or a
		// request that came over TLS. On plain http a Secure cookie would
		// never come back, and the console could not be used at all.
		Secure:     strings.HasPrefix(base, "https://"),
		SessionTTL: ttl,
		Logger:     a.log,
	})
	a.console.Store(c)
	mux.Handle(console.Prefix+"/", c.Handler())
	mux.Handle("GET "+console.Prefix, http.RedirectHandler(console.Prefix+"/", http.StatusMovedPermanently))
}

// callerOwner is the task owner the caller in ctx is, as the engine binds
// it (with no tenant named by the request: the credential's, if any).
func callerOwner(ctx context.Context) tasks.Owner {
	o := tasks.Owner{Principal: tasks.AnonymousPrincipal}
	if p, ok := auth.PrincipalFrom(ctx); ok {
		o = tasks.Owner{Principal: "user:" + p.Name, Tenant: p.Tenant}
	}
	return o
}

// callerName is the authenticated caller's principal, empty for anonymous.
func callerName(ctx context.Context) string {
	if p, ok := auth.PrincipalFrom(ctx); ok {
		return p.Name
	}
	return ""
}

// consoleEvents reads a task's event log for its owner.
type consoleEvents struct{ store tasks.Store }

// Events implements [console.EventLog].
func (e consoleEvents) Events(ctx context.Context, id a2a.TaskID) ([]tasks.Event, error) {
	evs, err := e.store.Events(ctx, callerOwner(ctx), id, 0)
	if err != nil {
		return nil, fmt.Errorf("events of task %s: %w", id, err)
	}
	return evs, nil
}

// approvalRequest is the request a waiting task's status carries
// (toolSkill's approvalRequestMessage): what an approval echoes.
type approvalRequest struct {
	Tool            string         `json:"tool"`
	SnapshotVersion string         `json:"snapshot_version"`
	Digest          string         `json:"digest"`
	Token           string         `json:"token,omitempty"`
	Arguments       map[string]any `json:"-"`
}

// approvalEntry is one entry of GET /a2a/approvals: what the console shows,
// and the request to answer for a caller who may decide.
type approvalEntry struct {
	console.Approval
	Request *approvalRequest `json:"request,omitempty"`
}

// maxAuditScan bounds the audit records read to find waiting calls: the
// newest ones, so a call that waits behind more newer ones is not listed.
const maxAuditScan = 5000

// pending lists the calls waiting for approval that the caller in ctx may
// see: every one for an approver, those of its own tasks for another
// caller. only, when set, narrows the list to that task. A call waits when
// its task is input-required with an approval request in its status; the
// audit log's approval_required records say which tasks to look at, so the
// store is not scanned.
func (a *Agent) pending(ctx context.Context, only a2a.TaskID) ([]approvalEntry, error) {
	if a.tools == nil {
		return nil, nil
	}
	name := callerName(ctx)
	approver := a.isApprover(name)
	f := mcp.AuditFilter{TaskID: string(only), Limit: maxAuditScan}
	if !approver {
		f.Principal = name
	}
	recs, err := a.tools.audit.List(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	me := callerOwner(ctx)
	seen := map[string]bool{}
	var out []approvalEntry
	for _, rec := range recs {
		if rec.Outcome != mcp.OutcomeApprovalRequired || seen[rec.TaskID] {
			continue
		}
		seen[rec.TaskID] = true
		id := a2a.TaskID(rec.TaskID)
		owner, err := a.store.OwnerOf(ctx, id)
		if errors.Is(err, tasks.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list approvals: owner of task %s: %w", id, err)
		}
		if !approver && (owner.Principal != me.Principal || (me.Tenant != "" && owner.Tenant != me.Tenant)) {
			continue
		}
		snap, err := a.store.Get(ctx, owner, id)
		if errors.Is(err, tasks.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list approvals: task %s: %w", id, err)
		}
		st := snap.Task.Status
		req := requestIn(st.Message)
		if st.State != a2a.TaskStateInputRequired || req == nil {
			continue
		}
		contract := a.tools.pipeline.Contract(req.Tool)
		e := approvalEntry{Approval: console.Approval{TaskID: id, Tool: req.Tool, Effect: string(contract.Effect), Risk: string(contract.Risk),
			Arguments: req.Arguments, RequestedBy: strings.TrimPrefix(owner.Principal, "user:"), Tenant: owner.Tenant,
			Reason: statusText(st.Message), Since: snap.Updated, MayDecide: approver}}
		if approver {
			e.Request = req
		}
		out = append(out, e)
	}
	return out, nil
}

// requestIn is the approval request in a status message's data parts.
func requestIn(m *a2a.Message) *approvalRequest {
	if m == nil {
		return nil
	}
	for _, p := range m.Parts {
		d, ok := p.Data().(map[string]any)
		if !ok {
			continue
		}
		r, ok := d[skill.ApprovalRequestKey].(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := r[k].(string); return s }
		args, _ := r["arguments"].(map[string]any)
		return &approvalRequest{Tool: str("tool"), SnapshotVersion: str("snapshot_version"), Digest: str("digest"), Token: str("token"), Arguments: args}
	}
	return nil
}

// statusText joins the text parts of a status message.
func statusText(m *a2a.Message) string {
	var parts []string
	for _, p := range m.Parts {
		if t := p.Text(); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, " ")
}

// approvalsList answers GET /a2a/approvals ("handoff approvals URL"): the
// calls waiting for approval that the caller may see, each with the
// request to answer when the caller is an approver.
func (a *Agent) approvalsList(w http.ResponseWriter, r *http.Request) {
	list, err := a.pending(r.Context(), "")
	if err != nil {
		a.log.Error("approvals list", slog.Any("error", err))
		http.Error(w, "the approvals could not be read", http.StatusInternalServerError)
		return
	}
	if list == nil {
		list = []approvalEntry{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"approvals": list})
}

// ApprovalMessage is the message that answers a waiting tool call's
// approval request on task: with approve, the approval (echoing the
// request's tool, snapshot_version, digest and token); without, a denial
// ({"approval": {"tool", "decision": "deny", "reason"}}), which carries no
// token, so that an agent that does not know denials never takes one for
// an approval. The console and "handoff approve"/"handoff deny" send it as
// the approver. scope widens an approval past its call into a grant.
func ApprovalMessage(task a2a.TaskID, tool, snapshotVersion, digest, token string, scope ApprovalScope, approve bool, reason string) *a2a.Message {
	body := map[string]any{"tool": tool}
	if approve {
		body["snapshot_version"], body["digest"], body["token"] = snapshotVersion, digest, token
		if scope.Scope != "" && scope.Scope != "once" {
			body["scope"] = scope.Scope
		}
		if scope.Resource != "" {
			body["resource"] = scope.Resource
		}
		if !scope.Expires.IsZero() {
			body["expires"] = scope.Expires.UTC().Format(time.RFC3339)
		}
	} else {
		body["decision"], body["reason"] = skill.ApprovalDeny, reason
	}
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{skill.ApprovalKey: body}))
	m.TaskID = task
	return m
}

// ApprovalScope is how far an approval reaches (README, "Grants"): Scope
// "once" (or empty) approves the one call; "task" every call of the tool by
// the same caller in the task; "scope" the tool's calls by that caller on
// resources under Resource until Expires. A grant never beats a deny or a
// mandatory ask.
type ApprovalScope struct {
	// Scope is once, task or scope.
	Scope string
	// Resource is a scope grant's path or URL prefix.
	Resource string
	// Expires ends a scope grant; required for one.
	Expires time.Time
}

// approvalDesk is the console's approval path: the approval message, sent
// through the engine as the signed-in caller.
type approvalDesk struct{ a *Agent }

// Pending implements [console.Approvals].
func (d approvalDesk) Pending(ctx context.Context) ([]console.Approval, error) {
	list, err := d.a.pending(ctx, "")
	out := make([]console.Approval, 0, len(list))
	for _, e := range list {
		out = append(out, e.Approval)
	}
	return out, err
}

// Decide implements [console.Approvals].
func (d approvalDesk) Decide(ctx context.Context, id a2a.TaskID, dec console.Decision) (a2a.TaskState, error) {
	list, err := d.a.pending(ctx, id)
	if err != nil {
		return "", err
	}
	if len(list) == 0 || list[0].Request == nil {
		return "", fmt.Errorf("task %s: %w", id, console.ErrNoApproval)
	}
	req := list[0].Request
	msg := ApprovalMessage(id, req.Tool, req.SnapshotVersion, req.Digest, req.Token, ApprovalScope{}, dec.Approve, dec.Reason)
	res, err := d.a.handler.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		return "", fmt.Errorf("answer the approval of task %s: %w", id, err)
	}
	if t, ok := res.(*a2a.Task); ok {
		return t.Status.State, nil
	}
	return "", fmt.Errorf("answer the approval of task %s: the agent answered with a message", id)
}

// peerRow is one peer as the console shows it.
type peerRow struct {
	Name        string    `json:"name"`
	URL         string    `json:"url"`
	State       string    `json:"state"`
	Reason      string    `json:"reason,omitempty"`
	KeyID       string    `json:"key_id,omitempty"`
	CardName    string    `json:"card_name,omitempty"`
	CardVersion string    `json:"card_version,omitempty"`
	Skills      []string  `json:"skills,omitempty"`
	FetchedAt   time.Time `json:"fetched_at,omitzero"`
}

// peersReport answers the console's peers page, for approvers (operators)
// only: each peer's trust state and reason, the key that verified its card,
// and its skills.
func (a *Agent) peersReport(w http.ResponseWriter, r *http.Request) {
	if !a.isApprover(callerName(r.Context())) {
		writeRESTError(w, http.StatusForbidden, "PERMISSION_DENIED", "APPROVERS_ONLY", "the peers page is for approvers")
		return
	}
	rows := []peerRow{}
	if a.del != nil {
		for _, p := range a.del.out.Peers.Peers() {
			row := peerRow{Name: p.Name, URL: p.BaseURL, State: string(p.State), KeyID: p.KeyID, FetchedAt: p.FetchedAt}
			if p.Err != nil {
				row.Reason = p.Err.Error()
			}
			if p.Card != nil {
				row.CardName, row.CardVersion = p.Card.Name, p.Card.Version
				for _, s := range p.Card.Skills {
					row.Skills = append(row.Skills, s.ID)
				}
			}
			rows = append(rows, row)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"peers": rows})
}

// serverRow is one MCP server as the console shows it.
type serverRow struct {
	Name     string   `json:"name"`
	State    string   `json:"state"`
	Protocol string   `json:"protocol,omitempty"`
	Connects int      `json:"connects"`
	Error    string   `json:"error,omitempty"`
	Tools    []string `json:"tools"`
}

// mcpReport answers the console's MCP page, for approvers only: each
// server's state and tools, and the catalog version.
func (a *Agent) mcpReport(w http.ResponseWriter, r *http.Request) {
	if !a.isApprover(callerName(r.Context())) {
		writeRESTError(w, http.StatusForbidden, "PERMISSION_DENIED", "APPROVERS_ONLY", "the MCP page is for approvers")
		return
	}
	out := struct {
		CatalogVersion string      `json:"catalog_version,omitempty"`
		Servers        []serverRow `json:"servers"`
	}{Servers: []serverRow{}}
	if a.tools != nil {
		snap := a.tools.manager.Snapshot()
		byServer := map[string][]string{}
		if snap != nil {
			out.CatalogVersion = snap.Version
			for _, t := range snap.Tools {
				byServer[t.Server] = append(byServer[t.Server], t.Name)
			}
		}
		for _, s := range a.tools.manager.Servers() {
			row := serverRow{Name: s.Name, State: string(s.State), Protocol: s.Protocol, Connects: s.Connects, Tools: byServer[s.Name]}
			if s.Err != nil {
				row.Error = redactURL(s.Err.Error())
			}
			out.Servers = append(out.Servers, row)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// redactURL hides the user info of any URL in an error's text: a server's
// configured URL may carry a password.
func redactURL(s string) string {
	fields := strings.Fields(s)
	for i, f := range fields {
		if u, err := url.Parse(strings.Trim(f, `"'():,`)); err == nil && u.User != nil {
			fields[i] = strings.Replace(f, u.User.String()+"@", "REDACTED@", 1)
		}
	}
	return strings.Join(fields, " ")
}
