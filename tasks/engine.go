package tasks

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/google/uuid"
)

// AnonymousPrincipal is the principal of every caller the transport did not
// authenticate: anonymous callers share one owner.
const AnonymousPrincipal = "anonymous"

// TenantAttribute is the a2asrv.User attribute that carries the tenant a
// caller's credential binds it to; it wins over the tenant a request names.
const TenantAttribute = "handoff.tenant"

// Page sizes of ListTasks.
const (
	DefaultPageSize = 50
	MaxPageSize     = 100
)

// Engine is Handoff's [a2asrv.RequestHandler]: it runs an executor per task
// and keeps every task's events in a [Store]. Create it with [NewEngine].
type Engine struct {
	store Store
	exec  a2asrv.AgentExecutor
	cfg   engineConfig

	mu   sync.Mutex
	hubs map[a2a.TaskID]*hub

	slots chan struct{} // one token per running execution

	// writers hands a new run to a writer goroutine that finished its last
	// one and waits for another (see [Engine.writer]).
	writers chan *run

	rep *replica // set when the store is shared with other replicas

	// keyed orders the creation of tasks from idempotency keys: a key's
	// task is looked up and created under it.
	keyed sync.Mutex

	// life orders run starts against Shutdown: a run counted in active has
	// started before closing was set, and Shutdown waits for all of them.
	life    sync.Mutex
	closing bool
	active  int
	idle    chan struct{} // closed when closing and active reaches zero
	isIdle  bool          // idle is closed
}

var _ a2asrv.RequestHandler = (*Engine)(nil)

// NewEngine returns an engine that runs exec and keeps tasks in store. Tasks
// the store holds as submitted or working were running when the process
// stopped: NewEngine takes them up again when exec is a [Resumer] that can
// resume them, and ends the others failed, with a status message saying so.
// On a store that replicas share (the Redis store) the engine is one replica:
// it takes only the tasks whose lease expired, and keeps doing so while it
// runs (see [WithLeaseTTL]); tasks another replica runs stay its own.
func NewEngine(ctx context.Context, store Store, exec a2asrv.AgentExecutor, opts ...Option) (*Engine, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	e := &Engine{
		store:   store,
		exec:    exec,
		cfg:     cfg,
		hubs:    make(map[a2a.TaskID]*hub),
		slots:   make(chan struct{}, cfg.maxConcurrent),
		writers: make(chan *run),
		idle:    make(chan struct{}),
	}
	recovered := e.recover
	if s, ok := store.(SharedStore); ok { // other replicas' running tasks are theirs
		recovered = func(ctx context.Context) error { return e.startReplica(ctx, s) }
	}
	if err := recovered(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// recover resumes or fails the tasks whose execution died with the
// previous process. Every failure is stored before any resumed run starts.
func (e *Engine) recover(ctx context.Context) error {
	lost, err := e.store.Unfinished(ctx)
	if err != nil {
		return fmt.Errorf("recover tasks: %w", err)
	}
	var resumed []*Snapshot
	for _, snap := range lost {
		if e.resumable(snap.Task) {
			resumed = append(resumed, snap)
			continue
		}
		ev := a2a.NewStatusUpdateEvent(snap.Task, a2a.TaskStateFailed,
			agentMessage(snap.Task, "The agent restarted while this task was running; its work was lost. Send the request again."))
		next, err := Apply(snap, ev, time.Now())
		if err != nil {
			return fmt.Errorf("recover task %s: %w", snap.Task.ID, err)
		}
		if err := e.append(ctx, snap, next, []a2a.Event{ev}); err != nil {
			return fmt.Errorf("recover task %s: %w", snap.Task.ID, err)
		}
		e.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "task failed by restart", slog.String("task_id", string(snap.Task.ID)))
	}
	for _, snap := range resumed {
		e.resume(ctx, snap)
	}
	return nil
}

func agentMessage(info a2a.TaskInfoProvider, text string) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, info, a2a.NewTextPart(text))
}

// ownerFrom returns the caller bound to the request: the authenticated user
// from a2a-go's call context, or the shared anonymous owner.
func ownerFrom(ctx context.Context, tenant string) Owner {
	o := Owner{Principal: AnonymousPrincipal, Tenant: tenant}
	if cc, ok := a2asrv.CallContextFrom(ctx); ok {
		if cc.Tenant() != "" {
			o.Tenant = cc.Tenant()
		}
		if cc.User != nil && cc.User.Authenticated {
			o.Principal = "user:" + cc.User.Name
			if t, _ := cc.User.Attributes[TenantAttribute].(string); t != "" {
				o.Tenant = t
			}
		}
	}
	return o
}

// mayApprove reports whether the caller is an authenticated principal the
// engine's [WithApprovers] check accepts.
func (e *Engine) mayApprove(ctx context.Context) bool {
	if e.cfg.isApprover == nil {
		return false
	}
	cc, ok := a2asrv.CallContextFrom(ctx)
	return ok && cc.User != nil && cc.User.Authenticated && e.cfg.isApprover(cc.User.Name)
}

// publicError turns a store error into what a client may see: not-found
// stays not-found, everything else is an internal error without details.
func (e *Engine) publicError(ctx context.Context, op string, id a2a.TaskID, err error) error {
	switch {
	case errors.Is(err, ErrNotFound):
		return a2a.NewError(a2a.ErrTaskNotFound, fmt.Sprintf("task %s not found", id))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	e.cfg.logger.LogAttrs(ctx, slog.LevelError, op+" failed", slog.String("task_id", string(id)), slog.Any("error", err))
	return a2a.NewError(a2a.ErrInternalError, op+" failed: the agent's store could not be read or written")
}

// acquire returns the task's hub, creating it from the store when no one
// holds it, and takes a reference the caller must release.
func (e *Engine) acquire(ctx context.Context, owner Owner, id a2a.TaskID) (*hub, *Snapshot, error) {
	if id == "" {
		return nil, nil, a2a.NewError(a2a.ErrInvalidParams, "task id is required")
	}
	e.mu.Lock()
	h := e.hubs[id]
	if h != nil {
		h.refs++
		e.mu.Unlock()
		h.mu.Lock()
		snap := h.snap
		h.mu.Unlock()
		if snap == nil || snap.Owner != owner {
			e.release(id, h)
			return nil, nil, a2a.NewError(a2a.ErrTaskNotFound, fmt.Sprintf("task %s not found", id))
		}
		return h, snap, nil
	}
	e.mu.Unlock()
	snap, err := e.store.Get(ctx, owner, id)
	if err != nil {
		return nil, nil, e.publicError(ctx, "get task", id, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if h = e.hubs[id]; h == nil { // nobody made one meanwhile
		h = newHub(id, snap)
		e.hubs[id] = h
		e.followRemote(h)
	}
	h.refs++
	h.mu.Lock()
	snap = h.snap
	h.mu.Unlock()
	return h, snap, nil
}

func (e *Engine) release(id a2a.TaskID, h *hub) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h.refs--
	if h.refs == 0 && e.hubs[id] == h {
		delete(e.hubs, id)
		e.unfollow(h)
	}
}

// beginRun counts a run that is starting. Unless always (a cancellation,
// which the request that asks for it waits for anyway), it refuses once the
// engine is shutting down.
func (e *Engine) beginRun(always bool) bool {
	e.life.Lock()
	defer e.life.Unlock()
	if e.closing && !always {
		return false
	}
	e.active++
	return true
}

// endRun uncounts a run, waking Shutdown after the last one.
func (e *Engine) endRun() {
	e.life.Lock()
	defer e.life.Unlock()
	e.active--
	e.markIdleLocked()
}

func (e *Engine) markIdleLocked() {
	if e.closing && e.active == 0 && !e.isIdle {
		e.isIdle = true
		close(e.idle)
	}
}

// GetTask implements [a2asrv.RequestHandler].
func (e *Engine) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	if req == nil || req.ID == "" {
		return nil, a2a.NewError(a2a.ErrInvalidParams, "task id is required")
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return nil, a2a.NewError(a2a.ErrInvalidParams, "historyLength must not be negative")
	}
	owner := ownerFrom(ctx, req.Tenant)
	e.mu.Lock()
	h := e.hubs[req.ID]
	e.mu.Unlock()
	var snap *Snapshot
	if h != nil { // a live task: its hub has the newest committed snapshot
		h.mu.Lock()
		if e.rep == nil || h.run != nil { // else another replica may have written since
			snap = h.snap
		}
		h.mu.Unlock()
	}
	if snap == nil {
		var err error
		if hr, ok := e.store.(HistoryReader); ok && req.HistoryLength != nil {
			snap, err = hr.GetRecent(ctx, owner, req.ID, *req.HistoryLength)
		} else {
			snap, err = e.store.Get(ctx, owner, req.ID)
		}
		if err != nil {
			return nil, e.publicError(ctx, "get task", req.ID, err)
		}
	}
	if snap.Owner != owner {
		return nil, a2a.NewError(a2a.ErrTaskNotFound, fmt.Sprintf("task %s not found", req.ID))
	}
	return view(snap.Task, req.HistoryLength, true), nil
}

// view returns the task as a client asked for it, sharing what it does not
// change with the immutable snapshot.
func view(t *a2a.Task, historyLength *int, artifacts bool) *a2a.Task {
	trimHistory := historyLength != nil && *historyLength < len(t.History)
	if !trimHistory && (artifacts || len(t.Artifacts) == 0) {
		return t
	}
	v := *t
	if trimHistory {
		v.History = t.History[len(t.History)-*historyLength:]
	}
	if !artifacts {
		v.Artifacts = nil
	}
	if trimHistory && *historyLength == 0 {
		v.History = nil // not an empty tail, which would keep the whole array reachable
	}
	return &v
}

// ListTasks implements [a2asrv.RequestHandler]. A listed task has no
// history unless historyLength asks for some, and no artifacts unless
// includeArtifacts does. A page holds at most pageSize tasks and, encoded,
// at most the byte cap ([WithListPageBytes]): it ends before the task that
// would take it over, and nextPageToken continues there; a first task larger
// than the cap comes alone.
func (e *Engine) ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	if req == nil {
		req = &a2a.ListTasksRequest{}
	}
	switch {
	case req.PageSize < 0 || req.PageSize > MaxPageSize:
		return nil, a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("pageSize must be between 1 and %d", MaxPageSize))
	case req.HistoryLength != nil && *req.HistoryLength < 0:
		return nil, a2a.NewError(a2a.ErrInvalidParams, "historyLength must not be negative")
	case req.Status != "" && !validState(req.Status):
		return nil, a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("unknown status %q", req.Status))
	}
	size := req.PageSize
	if size == 0 {
		size = DefaultPageSize
	}
	none := 0
	history := req.HistoryLength
	if history == nil {
		history = &none
	}
	q := ListQuery{
		Owner:         ownerFrom(ctx, req.Tenant),
		ContextID:     req.ContextID,
		State:         req.Status,
		UpdatedAfter:  req.StatusTimestampAfter,
		PageToken:     req.PageToken,
		HistoryLength: history,
		SkipArtifacts: !req.IncludeArtifacts,
	}
	resp := &a2a.ListTasksResponse{Tasks: []*a2a.Task{}, PageSize: size}
	used, chunk := 0, min(size, listFirstChunk)
	for {
		// The store decodes whole tasks: ask for a few at a time, as many as
		// the decode budget allows at the size seen so far, so that only the
		// trimmed views of a page's tasks stay in memory together.
		q.PageSize = chunk
		page, err := e.list(ctx, q)
		if err != nil {
			return nil, err
		}
		resp.TotalSize = page.TotalSize
		seen := 0
		for i, s := range page.Tasks {
			v := view(s.Task, history, req.IncludeArtifacts)
			n := encodedSize(v)
			if len(resp.Tasks) > 0 && used+n > e.cfg.listPageBytes {
				// The page ends before this task: continue after the i before it.
				resp.NextPageToken = q.PageToken
				if i > 0 {
					if resp.NextPageToken, err = e.tokenAfter(ctx, q, i); err != nil {
						return nil, err
					}
				}
				return resp, nil
			}
			resp.Tasks = append(resp.Tasks, v)
			used += n
			seen += approxSize(s.Task)
		}
		resp.NextPageToken = page.NextPageToken
		left := size - len(resp.Tasks)
		if page.NextPageToken == "" || left == 0 {
			return resp, nil
		}
		q.PageToken = page.NextPageToken
		chunk = left
		if len(page.Tasks) > 0 {
			chunk = min(left, max(1, listDecodeBudget/max(1, seen/len(page.Tasks))))
		}
	}
}

// Bounds of what one ListTasks decodes at once: a first store page of
// listFirstChunk tasks, then as many as listDecodeBudget bytes of tasks of
// the average size seen. Four lists of 4 MB tasks held 3.8 GB when each
// decoded its whole page at once (issue #14).
const (
	listFirstChunk   = 4
	listDecodeBudget = 16 << 20
)

func (e *Engine) list(ctx context.Context, q ListQuery) (*ListPage, error) {
	page, err := e.store.List(ctx, q)
	if errors.Is(err, ErrInvalidPageToken) {
		return nil, a2a.NewError(a2a.ErrInvalidParams, "pageToken was not issued by this agent")
	}
	if err != nil {
		return nil, e.publicError(ctx, "list tasks", "", err)
	}
	return page, nil
}

// tokenAfter is the store's page token that continues after the first n
// tasks of q: the store's tokens are its own, so it is asked for that page.
func (e *Engine) tokenAfter(ctx context.Context, q ListQuery, n int) (string, error) {
	q.PageSize = n
	page, err := e.list(ctx, q)
	if err != nil {
		return "", err
	}
	return page.NextPageToken, nil
}

// encodedSize is the length of v's JSON encoding.
func encodedSize(v *a2a.Task) int {
	var c countingWriter
	if err := json.NewEncoder(&c).Encode(v); err != nil {
		return 0 // the transport will fail to encode it too, and say so
	}
	return int(c)
}

type countingWriter int

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

// approxSize estimates the bytes a decoded task holds, from its parts' content.
func approxSize(t *a2a.Task) int {
	n := 512
	parts := func(ps []*a2a.Part) {
		for _, p := range ps {
			n += 64 + len(p.Text()) + len(p.Raw()) + len(p.URL())
			if p.Data() != nil {
				n += 256
			}
		}
	}
	for _, m := range t.History {
		if m != nil {
			parts(m.Parts)
		}
	}
	for _, a := range t.Artifacts {
		if a != nil {
			parts(a.Parts)
		}
	}
	if t.Status.Message != nil {
		parts(t.Status.Message.Parts)
	}
	return n
}

// validateMessage checks what a2a-go's own handler checks, with the field named.
func validateMessage(req *a2a.SendMessageRequest) error {
	switch {
	case req == nil:
		return a2a.NewError(a2a.ErrInvalidParams, "params are required")
	case req.Message == nil:
		return a2a.NewError(a2a.ErrInvalidParams, "message is required")
	case req.Message.ID == "":
		return a2a.NewError(a2a.ErrInvalidParams, "message.messageId is required")
	case len(req.Message.Parts) == 0:
		return a2a.NewError(a2a.ErrInvalidParams, "message.parts must not be empty")
	case req.Message.Role != a2a.MessageRoleUser && req.Message.Role != a2a.MessageRoleAgent:
		return a2a.NewError(a2a.ErrInvalidParams, "message.role must be ROLE_USER or ROLE_AGENT")
	case req.Config != nil && req.Config.HistoryLength != nil && *req.Config.HistoryLength < 0:
		return a2a.NewError(a2a.ErrInvalidParams, "configuration.historyLength must not be negative")
	}
	for i, p := range req.Message.Parts {
		if p == nil || p.Content == nil {
			return a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("message.parts[%d] has no content", i))
		}
	}
	return nil
}

// start validates a message, binds it to a new or continued task and starts
// the execution. The returned run has not yielded anything yet; base is the
// snapshot a stream starts from (nil for a new task). When the message's
// idempotency key already started a task, nothing starts: repeat is that
// task's hub, with a reference the caller must release.
func (e *Engine) start(ctx context.Context, req *a2a.SendMessageRequest) (_ *run, base *Snapshot, repeat *hub, _ error) {
	if err := validateMessage(req); err != nil {
		return nil, nil, nil, err
	}
	if req.Config != nil && req.Config.PushConfig != nil {
		if !e.cfg.caps.PushNotifications {
			return nil, nil, nil, a2a.NewError(a2a.ErrPushNotificationNotSupported, "this agent does not send push notifications")
		}
		if err := e.validatePushConfig(ctx, req.Config.PushConfig); err != nil {
			return nil, nil, nil, err
		}
	}
	owner := ownerFrom(ctx, req.Tenant)
	msg := *req.Message
	ec := &a2asrv.ExecutorContext{Metadata: req.Metadata, Tenant: owner.Tenant}
	if cc, ok := a2asrv.CallContextFrom(ctx); ok {
		ec.User = cc.User
		ec.ServiceParams = cc.ServiceParams()
	}

	select { // a slot before any state changes, so a refused message leaves nothing behind
	case e.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, nil, ctx.Err()
	}
	if !e.beginRun(false) {
		<-e.slots
		return nil, nil, nil, a2a.NewError(a2a.ErrServerError, "the agent is shutting down; try again later")
	}
	var (
		h         *hub
		keyDigest string // the content digest of a new task's keyed message
		approving bool   // an approver answers another caller's task
		refs      int    // references to h this call holds
		started   bool
		claimed   bool // the task's lease, with replicas
	)
	defer func() { // a refused message gives back everything it took
		if !started {
			if claimed {
				e.unclaim(msg.TaskID)
			}
			for range refs {
				e.release(msg.TaskID, h)
			}
			<-e.slots
			e.endRun()
		}
	}()
	if msg.TaskID != "" {
		var err error
		h, base, err = e.acquire(ctx, owner, msg.TaskID)
		if errors.Is(err, a2a.ErrTaskNotFound) && e.mayApprove(ctx) {
			// An approver answers for the task's owner, with an approval and
			// nothing else: the task stays theirs, and only the decision is kept.
			if taskOwner, oerr := e.store.OwnerOf(ctx, msg.TaskID); oerr == nil {
				if h2, base2, err2 := e.acquire(ctx, taskOwner, msg.TaskID); err2 == nil {
					var decision *a2a.Message
					if interrupted(base2.Task.Status.State) {
						decision = e.approvalIn(ctx, ec, base2.Task, &msg)
					}
					if decision != nil {
						h, base, err, owner = h2, base2, nil, taskOwner
						msg, approving = *decision, true
					} else {
						e.release(msg.TaskID, h2)
					}
				}
			}
		}
		if err != nil {
			return nil, nil, nil, err
		}
		refs = 1
		if base, claimed, err = e.claimTask(ctx, msg.TaskID, h, owner, base); err != nil {
			return nil, nil, nil, err
		}
		if msg.ContextID != "" && msg.ContextID != base.Task.ContextID {
			return nil, nil, nil, a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("message.contextId %q does not match task %s", msg.ContextID, msg.TaskID))
		}
		if base.Task.Status.State.Terminal() {
			return nil, nil, nil, a2a.NewError(a2a.ErrUnsupportedOperation,
				fmt.Sprintf("task %s is %s and takes no more messages", msg.TaskID, stateName(base.Task.Status.State)))
		}
		msg.ContextID = base.Task.ContextID
		ec.StoredTask, ec.Tenant = base.Task, owner.Tenant
		e.mu.Lock()
		h.refs++ // the run's reference; the caller keeps the one acquire took
		e.mu.Unlock()
		refs = 2
	} else {
		if key := e.messageKey(&msg); key != "" {
			msg.TaskID = keyedTaskID(owner, key)
			// Held until the new task's hub is in place, so a concurrent
			// repeat finds it instead of starting a second task.
			digest, err := contentDigest(&msg)
			if err != nil {
				return nil, nil, nil, a2a.NewError(a2a.ErrInvalidParams, "message parts cannot be encoded")
			}
			e.keyed.Lock()
			defer e.keyed.Unlock()
			rh, err := e.existing(ctx, owner, msg.TaskID)
			if err != nil {
				return nil, nil, nil, err
			}
			if rh != nil {
				if err := sameContent(rh, digest); err != nil {
					e.release(msg.TaskID, rh)
					return nil, nil, nil, err
				}
				return nil, nil, rh, nil
			}
			keyDigest = digest
		} else {
			msg.TaskID = newTaskID()
		}
		if msg.ContextID == "" {
			msg.ContextID = a2a.NewContextID()
		}
		var err error
		if _, claimed, err = e.claimTask(ctx, msg.TaskID, nil, owner, nil); err != nil {
			return nil, nil, nil, err
		}
		h = newHub(msg.TaskID, nil)
		h.refs = 2 // the run's and the caller's
		refs = 2
		e.mu.Lock()
		e.hubs[msg.TaskID] = h
		e.mu.Unlock()
	}
	ec.Message, ec.TaskID, ec.ContextID = &msg, msg.TaskID, msg.ContextID
	kept, err := e.redact(ctx, ec)
	if err != nil {
		return nil, nil, nil, err
	}

	h.mu.Lock()
	if base != nil && (h.run != nil || !interrupted(h.snap.Task.Status.State)) {
		state := h.snap.Task.Status.State
		h.mu.Unlock()
		return nil, nil, nil, a2a.NewError(a2a.ErrUnsupportedOperation, fmt.Sprintf("task %s is %s; only a task waiting for input takes a new message", msg.TaskID, stateName(state)))
	}
	// Made only now: a run starts its writer, which a refused message must not leave behind.
	r := e.newRun(ctx, h, owner, ec, base, true)
	r.digest, r.kept, r.approver = keyDigest, kept, approving
	h.run = r
	h.mu.Unlock()
	if req.Config != nil && req.Config.PushConfig != nil {
		r.pushConfig = req.Config.PushConfig
	}
	started = true
	go r.execute()
	return r, base, nil, nil
}

// SendMessage implements [a2asrv.RequestHandler]. It waits for the task to
// end or to need input, unless configuration.returnImmediately asks for the
// task as soon as it exists.
func (e *Engine) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	r, _, repeat, err := e.start(ctx, req)
	if err != nil {
		return nil, err
	}
	if repeat != nil {
		return e.sendRepeat(ctx, repeat, ownerFrom(ctx, req.Tenant), req)
	}
	defer e.release(r.h.taskID(), r.h)
	res, err := r.answer(ctx, req.Config)
	if err == nil && r.approver {
		res = outcome(res)
	}
	return res, err
}

// answer is what a blocking send of run r answers: its result once it
// ended or needs input, or as soon as the task exists when cfg asks to
// return immediately; a task as cfg's historyLength shows it.
func (r *run) answer(ctx context.Context, cfg *a2a.SendMessageConfig) (a2a.SendMessageResult, error) {
	wait := r.done
	if cfg != nil && cfg.ReturnImmediately {
		wait = r.started
	}
	select {
	case <-wait:
	case <-r.fullC: // told now: the task goes on when the store has room
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	res, err := r.result()
	if err != nil {
		return nil, err
	}
	if t, ok := res.(*a2a.Task); ok && cfg != nil {
		return view(t, cfg.HistoryLength, true), nil
	}
	return res, nil
}

// SendStreamingMessage implements [a2asrv.RequestHandler]: the task first,
// then its events in order, until it ends or needs input.
func (e *Engine) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return e.SendStreamingMessageWithFlush(ctx, req, nil)
}

// SendStreamingMessageWithFlush is [Engine.SendStreamingMessage] for a
// transport that buffers what it writes: the stream calls flush, when not
// nil, whenever it has yielded every committed event and is about to wait
// for the next, so the transport flushes once for the events of one write
// instead of once per event. flush runs in the goroutine that ranges over
// the stream.
func (e *Engine) SendStreamingMessageWithFlush(ctx context.Context, req *a2a.SendMessageRequest, flush func()) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !e.cfg.caps.Streaming {
			yield(nil, a2a.NewError(a2a.ErrUnsupportedOperation, "this agent does not stream"))
			return
		}
		r, base, repeat, err := e.start(ctx, req)
		if err != nil {
			yield(nil, err)
			return
		}
		if repeat != nil {
			e.streamRepeat(ctx, repeat, ownerFrom(ctx, req.Tenant), flush)(yield)
			return
		}
		defer e.release(r.h.taskID(), r.h)
		if r.approver { // the task's events are its owner's: only the outcome
			res, err := r.answer(ctx, nil)
			if err == nil {
				res = outcome(res)
			}
			yield(res, err)
			return
		}
		// A new task's log opens with the task; a continued one's with the
		// task working again, the message in its history.
		e.follow(ctx, r.h, r, r.owner, version(base), flush, yield)
	}
}

// follow yields the committed events of h after seq until one is final, the
// run ends, or the consumer stops, and returns the seq of the last event it
// yielded. r, when set, is the run whose result ends
// the stream if it produced no task (a direct message or an early error).
// flush, when set, is called before each wait for more events.
func (e *Engine) follow(ctx context.Context, h *hub, r *run, owner Owner, after uint64, flush func(), yield func(a2a.Event, error) bool) uint64 {
	for {
		h.mu.Lock()
		evs, inMemory := h.sinceLocked(after)
		wake := h.wake
		active := h.run != nil && (r == nil || h.run == r) || r == nil && h.remote
		h.mu.Unlock()
		if !inMemory {
			stored, err := e.store.Events(ctx, owner, h.taskID(), after)
			if err != nil {
				yield(nil, e.publicError(ctx, "read task events", h.taskID(), err))
				return after
			}
			evs = stored
		}
		for _, ev := range evs {
			after = ev.Seq
			if !yield(ev.Event, nil) {
				return after
			}
			if endsStream(ev.Event) {
				return after
			}
		}
		if len(evs) > 0 {
			continue
		}
		if !active {
			if r != nil {
				if res, err := r.result(); err != nil {
					yield(nil, err)
				} else if m, ok := res.(*a2a.Message); ok {
					yield(m, nil)
				}
			}
			return after
		}
		if flush != nil {
			flush()
		}
		if err := wait(ctx, wake); err != nil {
			return after
		}
	}
}

// newTaskID returns a time-ordered UUID (version 7): the bbolt store's
// buckets keyed by task id then take new tasks at their end, where one page
// holds many, instead of one random page each (a version 4 UUID), which
// made its commits write several pages per task.
func newTaskID() a2a.TaskID {
	return a2a.TaskID(uuid.Must(uuid.NewV7()).String()) // panics as a2a.NewTaskID does, without randomness
}

// endsStream reports whether ev leaves the task final, which closes a stream.
func endsStream(ev a2a.Event) bool {
	switch e := ev.(type) {
	case *a2a.TaskStatusUpdateEvent:
		return final(e.Status.State)
	case *a2a.Task:
		return final(e.Status.State)
	case *a2a.Message:
		return true
	}
	return false
}

// SubscribeToTask implements [a2asrv.RequestHandler]: the task as it stands,
// then its live events. A finished task answers UnsupportedOperation.
func (e *Engine) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !e.cfg.caps.Streaming {
			yield(nil, a2a.NewError(a2a.ErrUnsupportedOperation, "this agent does not stream"))
			return
		}
		if req == nil || req.ID == "" {
			yield(nil, a2a.NewError(a2a.ErrInvalidParams, "task id is required"))
			return
		}
		owner := ownerFrom(ctx, req.Tenant)
		h, _, err := e.acquire(ctx, owner, req.ID)
		if err != nil {
			yield(nil, err)
			return
		}
		defer e.release(req.ID, h)
		h.mu.Lock()
		snap := h.snap
		h.mu.Unlock()
		if snap.Task.Status.State.Terminal() {
			yield(nil, a2a.NewError(a2a.ErrUnsupportedOperation,
				fmt.Sprintf("task %s is %s; subscribe only to tasks still in progress (use GetTask)", req.ID, stateName(snap.Task.Status.State))))
			return
		}
		if !yield(snap.Task, nil) {
			return
		}
		e.followToEnd(ctx, h, owner, snap.Version, yield)
	}
}

// followToEnd yields h's events after seq until one is terminal: an
// interrupted task (input-required, auth-required) is not terminal, so a
// subscriber's stream stays open across its turns (A2A 1.0, 3.1.6).
func (e *Engine) followToEnd(ctx context.Context, h *hub, owner Owner, after uint64, yield func(a2a.Event, error) bool) {
	stopped, terminal := false, false
	track := func(ev a2a.Event, err error) bool {
		switch ev := ev.(type) {
		case *a2a.TaskStatusUpdateEvent:
			terminal = ev.Status.State.Terminal()
		case *a2a.Task:
			terminal = ev.Status.State.Terminal()
		}
		if !yield(ev, err) || err != nil {
			stopped = true
			return false
		}
		return true
	}
	for {
		after = e.follow(ctx, h, nil, owner, after, nil, track)
		if stopped || terminal || ctx.Err() != nil {
			return
		}
		// The task waits for its client: wait for its next turn, here or,
		// on replicas, on another replica.
		e.awaitTurn(h)
		h.mu.Lock()
		wake, idle := h.wake, h.run == nil && !h.remote && h.snap.Version <= after
		h.mu.Unlock()
		if idle {
			if err := wait(ctx, wake); err != nil {
				return
			}
		}
	}
}

// CancelTask implements [a2asrv.RequestHandler].
func (e *Engine) CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	if req == nil || req.ID == "" {
		return nil, a2a.NewError(a2a.ErrInvalidParams, "task id is required")
	}
	owner := ownerFrom(ctx, req.Tenant)
	h, _, err := e.acquire(ctx, owner, req.ID)
	if err != nil {
		return nil, err
	}
	defer e.release(req.ID, h)
	if t, done, err := e.cancelElsewhere(ctx, h, req.ID); done {
		return t, err
	}
	for {
		h.mu.Lock()
		r, snap := h.run, h.snap
		mine := false
		if r == nil {
			if snap.Task.Status.State.Terminal() {
				h.mu.Unlock()
				return nil, a2a.NewError(a2a.ErrTaskNotCancelable, fmt.Sprintf("task %s is %s and cannot be canceled", req.ID, stateName(snap.Task.Status.State)))
			}
			// Nothing runs (the task waits for input): cancel through a run of our own.
			ec := &a2asrv.ExecutorContext{TaskID: req.ID, ContextID: snap.Task.ContextID, StoredTask: snap.Task, Metadata: req.Metadata, Tenant: owner.Tenant}
			r = e.newRun(ctx, h, owner, ec, snap, false)
			h.run, mine = r, true
			e.beginRun(true)
		}
		h.mu.Unlock()
		if mine {
			e.mu.Lock()
			h.refs++ // released by the run's finish
			e.mu.Unlock()
		}
		t, retry, err := r.cancel(ctx, req.Metadata)
		if mine {
			r.finish()
		}
		if !retry {
			return t, err
		}
		select { // the run ended while we asked; cancel against what it left
		case <-r.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (e *Engine) validatePushConfig(ctx context.Context, c *a2a.PushConfig) error {
	if c.URL == "" {
		return a2a.NewError(a2a.ErrInvalidParams, "push config url is required")
	}
	if e.cfg.checkPushURL == nil {
		return a2a.NewError(a2a.ErrInvalidParams, "push config refused: this agent accepts no push targets")
	}
	if err := e.cfg.checkPushURL(ctx, c.URL); err != nil {
		return a2a.NewError(a2a.ErrInvalidParams, "push config refused: "+err.Error())
	}
	return nil
}

// redacted is a push config as a client may read it back: its secrets
// (token, credentials, the URL's userinfo and query) are never returned in
// full.
func redacted(c *a2a.PushConfig) *a2a.PushConfig {
	r := *c
	r.URL = MaskedURL(c.URL)
	r.Token = mask(c.Token)
	if c.Auth != nil {
		auth := *c.Auth
		auth.Credentials = mask(c.Auth.Credentials)
		r.Auth = &auth
	}
	return &r
}

func mask(secret string) string {
	switch {
	case secret == "":
		return ""
	case len(secret) <= 8:
		return "****"
	}
	return "****" + secret[len(secret)-4:]
}

func (e *Engine) pushSupported() error {
	if !e.cfg.caps.PushNotifications {
		return a2a.NewError(a2a.ErrPushNotificationNotSupported, "this agent does not send push notifications")
	}
	return nil
}

// CreateTaskPushConfig implements [a2asrv.RequestHandler]. A config without
// an id gets a fresh one.
func (e *Engine) CreateTaskPushConfig(ctx context.Context, req *a2a.PushConfig) (*a2a.PushConfig, error) {
	if err := e.pushSupported(); err != nil {
		return nil, err
	}
	if req == nil || req.TaskID == "" {
		return nil, a2a.NewError(a2a.ErrInvalidParams, "taskId is required")
	}
	if err := e.validatePushConfig(ctx, req); err != nil {
		return nil, err
	}
	c := *req
	if c.ID == "" {
		c.ID = uuid.NewString()
	}
	if err := e.store.PutPushConfig(ctx, ownerFrom(ctx, req.Tenant), &c); err != nil {
		return nil, e.publicError(ctx, "save push config", req.TaskID, err)
	}
	if f := e.cfg.onPushConfig; f != nil {
		f(c.TaskID)
	}
	return redacted(&c), nil
}

// GetTaskPushConfig implements [a2asrv.RequestHandler].
func (e *Engine) GetTaskPushConfig(ctx context.Context, req *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	if err := e.pushSupported(); err != nil {
		return nil, err
	}
	if req == nil || req.TaskID == "" || req.ID == "" {
		return nil, a2a.NewError(a2a.ErrInvalidParams, "taskId and id are required")
	}
	c, err := e.store.GetPushConfig(ctx, ownerFrom(ctx, req.Tenant), req.TaskID, req.ID)
	if errors.Is(err, ErrNotFound) {
		return nil, a2a.NewError(a2a.ErrTaskNotFound, fmt.Sprintf("push config %s of task %s not found", req.ID, req.TaskID))
	}
	if err != nil {
		return nil, e.publicError(ctx, "get push config", req.TaskID, err)
	}
	return redacted(c), nil
}

// ListTaskPushConfigs implements [a2asrv.RequestHandler].
func (e *Engine) ListTaskPushConfigs(ctx context.Context, req *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	if err := e.pushSupported(); err != nil {
		return nil, err
	}
	if req == nil || req.TaskID == "" {
		return nil, a2a.NewError(a2a.ErrInvalidParams, "taskId is required")
	}
	if req.PageSize < 0 || req.PageSize > MaxPageSize {
		return nil, a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("pageSize must be between 1 and %d", MaxPageSize))
	}
	size := req.PageSize
	if size == 0 {
		size = DefaultPageSize
	}
	var after string // the id of the last config of the previous page
	if req.PageToken != "" {
		b, err := base64.RawURLEncoding.DecodeString(req.PageToken)
		if err != nil || len(b) == 0 {
			return nil, a2a.NewError(a2a.ErrInvalidParams, "pageToken was not issued by this agent")
		}
		after = string(b)
	}
	cs, err := e.store.ListPushConfigs(ctx, ownerFrom(ctx, req.Tenant), req.TaskID)
	if err != nil {
		return nil, e.publicError(ctx, "list push configs", req.TaskID, err)
	}
	// The store lists a task's (few) configs ordered by id: a page starts after the token's id.
	page := &a2a.ListTaskPushConfigResponse{Configs: []*a2a.PushConfig{}}
	for _, c := range cs {
		if after != "" && c.ID <= after {
			continue
		}
		if len(page.Configs) == size {
			page.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(page.Configs[size-1].ID))
			break
		}
		page.Configs = append(page.Configs, redacted(c))
	}
	return page, nil
}

// DeleteTaskPushConfig implements [a2asrv.RequestHandler].
func (e *Engine) DeleteTaskPushConfig(ctx context.Context, req *a2a.DeleteTaskPushConfigRequest) error {
	if err := e.pushSupported(); err != nil {
		return err
	}
	if req == nil || req.TaskID == "" || req.ID == "" {
		return a2a.NewError(a2a.ErrInvalidParams, "taskId and id are required")
	}
	owner := ownerFrom(ctx, req.Tenant)
	err := e.store.DeletePushConfig(ctx, owner, req.TaskID, req.ID)
	if errors.Is(err, ErrNotFound) {
		// Deleting is idempotent (A2A 1.0, 3.1.10): a config already gone is
		// deleted; only a task the caller cannot see is not found.
		if _, err := e.store.Get(ctx, owner, req.TaskID); err != nil {
			if errors.Is(err, ErrNotFound) {
				return a2a.NewError(a2a.ErrTaskNotFound, fmt.Sprintf("task %s not found", req.TaskID))
			}
			return e.publicError(ctx, "delete push config", req.TaskID, err)
		}
		return nil
	}
	if err != nil {
		return e.publicError(ctx, "delete push config", req.TaskID, err)
	}
	return nil
}

// GetExtendedAgentCard implements [a2asrv.RequestHandler].
func (e *Engine) GetExtendedAgentCard(ctx context.Context, _ *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	if !e.cfg.caps.ExtendedAgentCard {
		return nil, a2a.NewError(a2a.ErrUnsupportedOperation, "this agent has no extended card")
	}
	if e.cfg.extendedCard == nil {
		return nil, a2a.ErrExtendedCardNotConfigured
	}
	return e.cfg.extendedCard(ctx)
}

// Shutdown stops taking new messages and waits for running executions to
// finish. When ctx ends first, the tasks still running are failed with a
// status message saying the agent shut down, so their streams get a final
// event, except those the executor can resume (see [Resumer]): their
// executions are stopped with cause [ErrShutdown] and the tasks stay
// working, for the next start to take up. It returns an error, wrapping
// ctx's, only when it failed tasks. It does not close the store.
func (e *Engine) Shutdown(ctx context.Context) error {
	defer e.stopReplica() // last: the runs' leases are renewed until they end
	e.life.Lock()
	if !e.closing {
		e.closing = true
		e.markIdleLocked()
	}
	e.life.Unlock()
	select {
	case <-e.idle:
		return nil
	case <-ctx.Done():
	}
	e.mu.Lock()
	var runs []*run
	for _, h := range e.hubs {
		h.mu.Lock()
		if h.run != nil {
			runs = append(runs, h.run)
		}
		h.mu.Unlock()
	}
	e.mu.Unlock()
	failed := 0
	for _, r := range runs {
		if !r.detach() {
			r.abort("The agent shut down before this task finished. Send the request again.")
			failed++
		}
	}
	if failed == 0 {
		return nil // every task still running was left to resume
	}
	return fmt.Errorf("%d tasks still running were failed: %w", failed, ctx.Err())
}
