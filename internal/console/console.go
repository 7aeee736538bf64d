package console

import (
	"context"
	"embed"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/auth"
	"github.com/handoff-a2a/handoff/tasks"
)

// Prefix is the path the console is served under.
const Prefix = "/console"

//go:embed assets
var assets embed.FS

// Tasks is what the console reads through the agent's engine. It is called
// with the signed-in caller's principal in ctx ([auth.WithPrincipal]), so
// the engine's owner rules decide what the caller sees.
type Tasks interface {
	ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error)
	GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error)
}

// EventLog reads a task's event log for the caller in ctx: its owner only;
// another's task or an unknown one is [tasks.ErrNotFound].
type EventLog interface {
	Events(ctx context.Context, id a2a.TaskID) ([]tasks.Event, error)
}

// Approvals is the approval path the console's buttons use: the same
// approval message an approver could send, built and sent by the agent as
// the caller in ctx.
type Approvals interface {
	// Pending lists the approval requests the caller in ctx may see: every
	// one for an approver, those of its own tasks for another caller.
	Pending(ctx context.Context) ([]Approval, error)
	// Decide answers the approval request of task as the caller in ctx, and
	// returns the task's state after the decision.
	Decide(ctx context.Context, task a2a.TaskID, d Decision) (a2a.TaskState, error)
}

// Approval is one call waiting for an approval, as the console shows it:
// never its token.
type Approval struct {
	// TaskID is the task the call waits in.
	TaskID a2a.TaskID `json:"task_id"`
	// Tool is the namespaced tool (server__tool).
	Tool string `json:"tool"`
	// Effect is the tool's effect in its local contract (read, write,
	// destructive, external_send).
	Effect string `json:"effect,omitempty"`
	// Risk is the tool's risk in its local contract (low, high).
	Risk string `json:"risk,omitempty"`
	// Arguments are the canonical arguments, with redacted values replaced.
	Arguments map[string]any `json:"arguments,omitempty"`
	// RequestedBy is the task's owner (its principal).
	RequestedBy string `json:"requested_by"`
	// Tenant is the task's tenant; empty for none.
	Tenant string `json:"tenant,omitempty"`
	// Reason is why the call waits.
	Reason string `json:"reason,omitempty"`
	// Since is when the task started waiting.
	Since time.Time `json:"since"`
	// MayDecide tells whether the caller may approve or deny it.
	MayDecide bool `json:"may_decide"`
}

// Decision is an approver's answer to an approval request.
type Decision struct {
	// Approve is true to let the call run, false to deny it.
	Approve bool
	// Scope is how far an approval reaches: "once" (this call) is the only
	// one today; grants for a task or wider come with policy grants.
	Scope string
	// Reason explains a denial; the caller sees it.
	Reason string
}

// Config is what a [Console] serves from. Tasks, Events, Approvals and
// Authenticate are required; every report is optional.
type Config struct {
	// Tasks lists and reads the caller's tasks; required.
	Tasks Tasks
	// Events reads a task's event log; required.
	Events EventLog
	// Approvals lists the pending approvals and answers them; required.
	Approvals Approvals
	// Authenticate checks a credential as the agent checks its callers
	// (*auth.Authenticator's method): a nil principal is an anonymous caller.
	Authenticate func(r *http.Request) (*auth.Principal, error)
	// APIKeyHeader is the header an API key travels in.
	APIKeyHeader string
	// IsApprover tells whether a principal may approve tool calls. Default:
	// nobody may.
	IsApprover func(principal string) bool
	// Reports are the agent's read-only JSON handlers by name ("peers",
	// "mcp", "push", "ledger", "audit", "delegations"), called with the
	// caller's principal in the request's context.
	Reports map[string]http.Handler
	// PushRetry is the agent's POST /a2a/push/retry handler, which the push
	// page's "Retry now" buttons reach at POST /console/api/push/retry,
	// called with the caller's principal in the request's context once the
	// session's CSRF token checked out. Nil: no such buttons work (404).
	PushRetry http.Handler
	// Blob serves a blob of a task's artifacts (GET with path values task
	// and digest), with the caller's principal in the request's context.
	Blob http.Handler
	// Secure marks the session cookie Secure: set it when the console is
	// reached over https (public_url), whatever the agent itself listens on.
	// A request that arrived over TLS gets a Secure cookie either way.
	Secure bool
	// SessionTTL is how long a session lasts from sign-in. Default 8h.
	SessionTTL time.Duration
	// Logger hears of the console's failures, its approval decisions and
	// refused sign-ins. Default slog.Default().
	Logger *slog.Logger
}

// Console is the operator console of one agent. Make it with [New], mount
// [Console.Handler] at [Prefix]+"/", and call [Console.Notify] after every
// commit of a task's events.
type Console struct {
	cfg      Config
	sessions *sessions
	static   http.Handler

	mu   sync.Mutex
	subs map[chan a2a.TaskID]struct{}

	ending  sync.Once
	stopped chan struct{} // closed by EndStreams
}

// New returns the console serving from c.
func New(c Config) *Console {
	if c.SessionTTL <= 0 {
		c.SessionTTL = 8 * time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.IsApprover == nil {
		c.IsApprover = func(string) bool { return false }
	}
	return &Console{cfg: c, sessions: newSessions(c.SessionTTL), static: http.StripPrefix(Prefix+"/", http.FileServerFS(assets)),
		subs: map[chan a2a.TaskID]struct{}{}, stopped: make(chan struct{})}
}

// EndStreams ends every live stream, now and from now on. A stream never
// goes idle, so a server's Shutdown would wait for it until its deadline:
// register EndStreams with http.Server.RegisterOnShutdown.
func (c *Console) EndStreams() {
	c.ending.Do(func() { close(c.stopped) })
}

// Notify tells the console's live streams that task id changed. It does not
// block: a stream that is behind misses the id and resynchronises.
func (c *Console) Notify(id a2a.TaskID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ch := range c.subs {
		select {
		case ch <- id:
		default:
		}
	}
}

func (c *Console) subscribe() (<-chan a2a.TaskID, func()) {
	ch := make(chan a2a.TaskID, 256)
	c.mu.Lock()
	c.subs[ch] = struct{}{}
	c.mu.Unlock()
	return ch, func() {
		c.mu.Lock()
		delete(c.subs, ch)
		c.mu.Unlock()
	}
}

// contentSecurityPolicy allows the console's own scripts, styles and
// requests and nothing else: no inline script, no other origin, no frames.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"

// Handler serves the console's pages and API under [Prefix].
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"/{$}", c.page)
	mux.Handle("GET "+Prefix+"/assets/", c.static)
	mux.HandleFunc("POST "+Prefix+"/api/session", c.signIn)
	mux.Handle("GET "+Prefix+"/api/session", c.signedIn(c.me))
	mux.Handle("DELETE "+Prefix+"/api/session", c.signedIn(c.signOut))
	mux.Handle("GET "+Prefix+"/api/tasks", c.signedIn(c.listTasks))
	mux.Handle("GET "+Prefix+"/api/tasks/{id}", c.signedIn(c.timeline))
	mux.Handle("GET "+Prefix+"/api/tasks/{id}/artifacts/{artifact}/{part}", c.signedIn(c.artifact))
	mux.Handle("GET "+Prefix+"/api/stream", c.signedIn(c.stream))
	mux.Handle("GET "+Prefix+"/api/approvals", c.signedIn(c.approvals))
	mux.Handle("POST "+Prefix+"/api/approvals/{id}", c.signedIn(c.decide))
	mux.Handle("GET "+Prefix+"/api/reports/{name}", c.signedIn(c.report))
	mux.Handle("POST "+Prefix+"/api/push/retry", c.signedIn(c.pushRetry))
	mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		mux.ServeHTTP(w, r)
	})
}

// page serves the console's one HTML page; the script draws every view.
func (c *Console) page(w http.ResponseWriter, r *http.Request) {
	b, err := assets.ReadFile("assets/index.html")
	if err != nil {
		http.Error(w, "the console's page is missing", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b)
}
