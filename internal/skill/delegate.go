package skill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/artifacts"
	"github.com/handoff-a2a/handoff/delegation"
	"github.com/handoff-a2a/handoff/tasks"
)

// Outbound is the agent's side of every delegation: its verified peers,
// the sender that follows their tasks, the gate that decides what to
// commit, and where a delegation's records and artifacts go.
type Outbound struct {
	// Peers are the configured peers, with their cards verified.
	Peers *delegation.Directory
	// Sender sends to a peer and follows its task.
	Sender *delegation.Sender
	// Gate decides on each peer's end; it writes the ledger.
	Gate *acceptance.Gate
	// Results decides on the skills' own results by their output
	// contracts, into the same ledger; nil when no skill has one.
	Results *acceptance.Gate
	// Index is the ledger's index of delegations, written as each goes.
	Index Index
	// Artifacts holds the peers' artifacts by digest, each bounded in size:
	// the ledger's evidence digests name them.
	Artifacts *artifacts.Store
	// Self is this agent in a provenance chain (it knows its card's digest
	// once its routes are built).
	Self func() delegation.Hop
	// BlobURL is the URL this agent serves the blob digest at, for the task
	// task of tenant (empty for none).
	BlobURL func(task a2a.TaskID, tenant, digest string) string
	// Log hears of each delegation's end, with its reason.
	Log *slog.Logger
}

// Index records delegations as they go: GET /a2a/delegations and a
// restart read it.
type Index interface {
	Track(ctx context.Context, d *acceptance.Delegation) error
}

// DelegateSpec is a delegate skill's peer side, its defaults applied.
type DelegateSpec struct {
	// Skill is the peer skill's id.
	Skill string
	// Tags narrow the choice of peer to those whose skill has all of them.
	Tags []string
	// Scopes are asked of the peer in the envelope.
	Scopes []string
	// Timeout is the delegation's deadline, sent in the envelope.
	Timeout time.Duration
	// Reverify bounds how often an unknown decision is checked again (with
	// backoff) before it settles; 0 settles at once.
	Reverify int
	// BlobThreshold is the size in bytes above which a raw part of the
	// peer's artifacts reaches our caller as a blob URL instead of inline.
	BlobThreshold int64
}

// Delegate fulfils a skill with a verified peer and commits the peer's
// completion only when the acceptance gate does. Its task keeps a
// [delegation.Record] in its metadata, so that after a restart it follows
// the peer's task again instead of losing it.
type Delegate struct {
	id   string
	spec DelegateSpec
	out  *Outbound
	// key names the delegation when it is one of several in its task (a
	// Program's, see [Caps.Delegate]): its idempotency key, its index entry
	// and its ledger id. Empty: the task's id, the one delegation of its task.
	key string
}

// NewDelegate returns the executor of the delegate skill id.
func NewDelegate(id string, spec DelegateSpec, out *Outbound) *Delegate {
	return &Delegate{id: id, spec: spec, out: out}
}

// delegationID is the delegation's id: its key, or its task's id.
func (s *Delegate) delegationID(ec *a2asrv.ExecutorContext) string {
	if s.key != "" {
		return s.key
	}
	return string(ec.TaskID)
}

// quietMargin is how long, past its deadline, a delegation may stay quiet:
// the gate's own checks run after the peer's task ends.
const quietMargin = time.Minute

// QuietFor implements [tasks.QuietBound]: a peer may work without a word
// until the delegation's deadline; only then is our task failed, not at
// the engine's idle timeout (which would cancel the peer's task too).
func (s *Delegate) QuietFor(*a2asrv.ExecutorContext) time.Duration {
	return s.spec.Timeout + quietMargin
}

// findPeer returns a verified peer offering the skill's peer skill,
// refreshing the directory once when none does yet.
func (s *Delegate) findPeer(ctx context.Context) (delegation.PeerStatus, bool) {
	peer, ok := s.out.Peers.ForSkill(s.spec.Skill, s.spec.Tags...)
	if !ok { // a peer may have been refreshed since: look once more
		_ = s.out.Peers.Refresh(ctx)
		peer, ok = s.out.Peers.ForSkill(s.spec.Skill, s.spec.Tags...)
	}
	return peer, ok
}

// newRecord is the record of a delegation to peer, before anything is sent.
func (s *Delegate) newRecord(ec *a2asrv.ExecutorContext, peer delegation.PeerStatus) *delegation.Record {
	// The key is the delegation's id: a restart (or a program run
	// again) that re-sends finds the peer's task.
	return &delegation.Record{Peer: peer.Name, CardDigest: peer.CardDigest, IdempotencyKey: s.delegationID(ec),
		Deadline: time.Now().Add(s.spec.Timeout).UTC()}
}

var (
	_ a2asrv.AgentExecutor = (*Delegate)(nil)
	_ tasks.Resumer        = (*Delegate)(nil)
	_ tasks.QuietBound     = (*Delegate)(nil)
)

// Execute implements [a2asrv.AgentExecutor]: the peer's progress is
// streamed to our caller as working updates; our task completes only when
// the gate commits, else it fails with the gate's reasons. The peer's
// artifacts are assembled and stored as they stream, but reach our caller
// only with the commit (large raw parts as blob URLs).
func (s *Delegate) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask != nil {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, "A delegated task takes no further messages.")), nil)
			return
		}
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		peer, ok := s.findPeer(ctx)
		if !ok {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec,
				fmt.Sprintf("No verified peer offers skill %s; see handoff peers.", s.spec.Skill))), nil)
			return
		}
		rec := s.newRecord(ec, peer)
		// Stored before anything is sent, so a restart knows what it may have sent.
		if !s.track(ctx, ec, rec, yield, fmt.Sprintf("Delegating to %s.", peer.Name)) {
			return
		}
		s.delegate(ctx, ec, peer, rec, ec.Message.Parts, yield)
	}
}

// CanResume implements [tasks.Resumer]: a task whose delegation record
// was stored can be followed again.
func (s *Delegate) CanResume(task *a2a.Task) bool {
	_, ok, err := delegation.RecordFrom(task.Metadata)
	return ok && err == nil
}

// Resume implements [tasks.Resumer]: it follows the peer's task the record
// names to its end, or, when the restart came before the peer answered,
// sends the request again with the same idempotency key, which a Handoff
// peer answers with the task it already started. Then the gate decides.
func (s *Delegate) Resume(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		rec, _, err := delegation.RecordFrom(ec.StoredTask.Metadata)
		if err != nil {
			yield(nil, err)
			return
		}
		peer, err := s.awaitPeer(ctx, rec)
		if err != nil {
			s.end(ctx, ec, rec, acceptance.Failed, yield,
				fmt.Sprintf("The agent restarted and %v; its task %s was not followed.", err, rec.RemoteTaskID))
			return
		}
		var parts []*a2a.Part
		for _, m := range ec.StoredTask.History {
			if m.Role == a2a.MessageRoleUser {
				parts = m.Parts
				break
			}
		}
		if rec.RemoteTaskID == "" && len(parts) == 0 {
			s.end(ctx, ec, rec, acceptance.Failed, yield, "The agent restarted and the delegated request is not in the task's history.")
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, agentText(ec,
			fmt.Sprintf("The agent restarted; following the delegation to %s again.", peer.Name))), nil) {
			return
		}
		s.delegate(ctx, ec, peer, rec, parts, yield)
	}
}

// awaitPeer returns the verified peer rec names. A peer not verified yet
// because it could not be reached (our start, or its own restart, may
// come first) is asked again with backoff until the delegation's
// deadline: its task may well have ended, and only the peer can say how.
// A peer whose card no longer verifies is not waited for.
func (s *Delegate) awaitPeer(ctx context.Context, rec *delegation.Record) (delegation.PeerStatus, error) {
	ctx, cancel := context.WithDeadline(ctx, rec.Deadline)
	defer cancel()
	for attempt := 0; ; attempt++ {
		peers := s.out.Peers.Peers()
		i := slices.IndexFunc(peers, func(p delegation.PeerStatus) bool { return p.Name == rec.Peer })
		if i < 0 {
			return delegation.PeerStatus{}, fmt.Errorf("peer %s is no longer configured", rec.Peer)
		}
		switch p := peers[i]; {
		case p.State == delegation.StateVerified:
			return p, nil
		case p.State == delegation.StateRefused:
			return delegation.PeerStatus{}, fmt.Errorf("peer %s is no longer verified (%v)", rec.Peer, p.Err)
		case attempt > 0:
			t := time.NewTimer(min(time.Second<<min(attempt-1, 5), 30*time.Second))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return delegation.PeerStatus{}, fmt.Errorf("peer %s was not reached before the delegation's deadline (%v)", rec.Peer, p.Err)
			}
		}
		_ = s.out.Peers.Refresh(ctx) // a refresh cut short by ctx is seen at the next turn
	}
}

// track stores rec in our task's log (a working status update whose
// metadata carries it) and in the ledger's index of delegations. It
// returns false when the task should stop.
func (s *Delegate) track(ctx context.Context, ec *a2asrv.ExecutorContext, rec *delegation.Record,
	yield func(a2a.Event, error) bool, text string) bool {
	if err := s.out.Index.Track(ctx, s.index(ec, rec)); err != nil {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, "The delegation could not be recorded: "+err.Error())), nil)
		return false
	}
	ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, agentText(ec, text))
	ev.Metadata = rec.Metadata()
	return yield(ev, nil)
}

func (s *Delegate) index(ec *a2asrv.ExecutorContext, rec *delegation.Record) *acceptance.Delegation {
	return &acceptance.Delegation{TaskID: s.delegationID(ec), Skill: s.id, Peer: rec.Peer, RemoteTaskID: rec.RemoteTaskID,
		RemoteState: rec.RemoteState, Outcome: rec.Outcome, Reason: rec.Reason, Updated: time.Now().UTC()}
}

// delegate sends parts to the peer (or, when rec names the peer's task
// already, follows that task), records the peer's task as soon as it is
// known, and runs the gate on its end.
func (s *Delegate) delegate(ctx context.Context, ec *a2asrv.ExecutorContext, peer delegation.PeerStatus,
	rec *delegation.Record, parts []*a2a.Part, yield func(a2a.Event, error) bool) {
	dctx, cancel := context.WithDeadline(ctx, rec.Deadline)
	defer cancel()
	stopped := false
	// The peer's artifacts are assembled and stored as they stream; they
	// reach our caller only at commit, from the final task they agree with.
	collect := artifacts.NewCollector(s.out.Artifacts)
	defer collect.Close() // a stream given up leaves no spooled temp file
	var collectErr error
	progress := func(ev a2a.Event) {
		if stopped {
			return
		}
		rec.EventsSeen++
		if err := collect.Add(ctx, ev); err != nil && collectErr == nil {
			collectErr = err
		}
		if info := ev.TaskInfo(); rec.RemoteTaskID == "" && info.TaskID != "" {
			rec.RemoteTaskID, rec.RemoteContextID = string(info.TaskID), info.ContextID
			if !s.track(ctx, ec, rec, yield, fmt.Sprintf("%s: task %s", peer.Name, info.TaskID)) {
				stopped = true
				cancel()
				return
			}
		}
		if u, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && !u.Status.State.Terminal() {
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, relayed(ec, peer.Name, u.Status)), nil) {
				stopped = true
				cancel()
			}
		}
	}
	var (
		final *a2a.Task
		err   error
	)
	if rec.RemoteTaskID != "" {
		final, err = s.out.Sender.Follow(dctx, peer, a2a.TaskID(rec.RemoteTaskID), progress)
	} else {
		env := (&delegation.Envelope{Actor: principalOf(ec), Tenant: ec.Tenant, Scopes: s.spec.Scopes,
			Deadline: rec.Deadline, IdempotencyKey: rec.IdempotencyKey}).Next(s.out.Self())
		if env.Actor == "" {
			env.Actor = "anonymous"
		}
		final, err = s.out.Sender.Delegate(dctx, peer, a2a.NewMessage(a2a.MessageRoleUser, parts...), env, progress)
	}
	if stopped {
		return
	}
	if err != nil && final != nil && final.Status.State == a2a.TaskStateCompleted && ctx.Err() == nil {
		err = nil // the deadline passed as the peer finished: the work is done, so the gate decides
	}
	if err != nil {
		s.unfollowed(ctx, ec, peer, rec, final, err, yield)
		return
	}
	rec.RemoteState = final.Status.State
	if collectErr == nil {
		collectErr = collect.Finish(ctx)
	}
	digests, err := keep(ctx, collect, final.Artifacts)
	if err == nil {
		err = collectErr
	}
	if err != nil {
		s.end(ctx, ec, rec, acceptance.Unknown, yield, fmt.Sprintf("The peer's artifacts were not kept (peer %s, task %s): %v", peer.Name, final.ID, err))
		return
	}
	// The final task is what the gate reads; what the stream showed whole
	// must agree with it, or the peer told two stories and nothing commits.
	if err := collect.Check(final.Artifacts); err != nil && final.Status.State == a2a.TaskStateCompleted {
		s.end(ctx, ec, rec, acceptance.Rejected, yield, fmt.Sprintf("Not committed: %s (peer %s, task %s). The peer's stream and its final task disagree: %v",
			acceptance.Rejected, peer.Name, final.ID, err))
		return
	}
	// Blobs are stored before the gate runs: once it commits, nothing may
	// fail. Only a completion can commit, so only its artifacts are stored.
	var out []*a2a.Artifact
	if final.Status.State == a2a.TaskStateCompleted {
		out, err = s.present(ctx, ec, final.Artifacts)
	}
	if err != nil {
		s.end(ctx, ec, rec, acceptance.Unknown, yield, fmt.Sprintf("The peer's artifacts were not kept as blobs (peer %s, task %s): %v", peer.Name, final.ID, err))
		return
	}
	decision, ok := s.decide(ctx, ec, rec, final, digests, yield)
	if !ok {
		return
	}
	rec.Outcome = decision.Outcome.String()
	if decision.Outcome != acceptance.Committed {
		rec.Reason = bounded(failedChecks(decision))
	}
	s.logEnd(ec, rec)
	if err := s.out.Index.Track(ctx, s.index(ec, rec)); err != nil {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, "The delegation could not be recorded: "+err.Error())), nil)
		return
	}
	if decision.Outcome != acceptance.Committed {
		ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec,
			fmt.Sprintf("Not committed: %s (peer %s, task %s). %s", decision.Outcome, peer.Name, final.ID, reasons(decision))))
		ev.Metadata = rec.Metadata()
		yield(ev, nil)
		return
	}
	for _, art := range out {
		ev := a2a.NewArtifactEvent(ec, art.Parts...)
		ev.Artifact.Name, ev.Artifact.Description = art.Name, art.Description
		if !yield(ev, nil) {
			return
		}
	}
	ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, agentText(ec,
		fmt.Sprintf("Committed: peer %s's completion passed the contract (%s).", peer.Name, reasons(decision))))
	ev.Metadata = rec.Metadata()
	yield(ev, nil)
}

// logEnd logs a delegation's end: at info when it committed, else at
// warn with its reason (the peer's own words when it failed).
func (s *Delegate) logEnd(ec *a2asrv.ExecutorContext, rec *delegation.Record) {
	attrs := []any{slog.String("task_id", string(ec.TaskID)), slog.String("skill", s.id), slog.String("peer", rec.Peer),
		slog.String("remote_task_id", rec.RemoteTaskID), slog.String("remote_state", string(rec.RemoteState)), slog.String("decision", rec.Outcome)}
	if rec.Outcome == acceptance.Committed.String() {
		s.out.Log.Info("delegation committed", attrs...)
		return
	}
	s.out.Log.Warn("delegation not committed", append(attrs, slog.String("reason", rec.Reason))...)
}

// relayed is the status message our caller sees for a peer's progress:
// the peer's own message, its parts as they are, or, when it sent none,
// the peer's name and state ("payments: working").
func relayed(ec *a2asrv.ExecutorContext, peer string, st a2a.TaskStatus) *a2a.Message {
	if st.Message != nil && len(st.Message.Parts) > 0 {
		return a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, st.Message.Parts...)
	}
	return agentText(ec, peer+": "+stateWord(st.State))
}

// stateWord is a task state as a status message says it: "working".
func stateWord(s a2a.TaskState) string {
	return strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_"))
}

// messageText joins the text parts of m; "" for nil.
func messageText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range m.Parts {
		if p != nil {
			b.WriteString(p.Text())
		}
	}
	return b.String()
}

// maxReason bounds, in runes, the reason a delegation's index keeps.
const maxReason = 500

func bounded(s string) string {
	if r := []rune(s); len(r) > maxReason {
		return string(r[:maxReason]) + "…"
	}
	return s
}

// failedChecks lists the gate's checks that did not pass, with their reasons.
func failedChecks(d acceptance.Decision) string {
	var parts []string
	for _, c := range d.Reasons {
		if !c.Passed {
			parts = append(parts, strings.TrimSuffix(c.Name+": "+c.Reason, ": "))
		}
	}
	return strings.Join(parts, "; ")
}

// unfollowed ends a delegation whose peer's task was not followed to its
// end (a timeout, a cancel, a peer that stopped answering), recording it
// failed with the peer's task as last seen.
func (s *Delegate) unfollowed(ctx context.Context, ec *a2asrv.ExecutorContext, peer delegation.PeerStatus, rec *delegation.Record,
	last *a2a.Task, err error, yield func(a2a.Event, error) bool) {
	if last != nil {
		rec.RemoteState = last.Status.State
	}
	var text string
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && rec.RemoteTaskID == "":
		text = fmt.Sprintf("The delegation's deadline %s passed before peer %s answered", rec.Deadline.Format(time.RFC3339), peer.Name)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		text = fmt.Sprintf("The delegation's deadline %s passed before peer %s's task %s ended", rec.Deadline.Format(time.RFC3339), peer.Name, rec.RemoteTaskID)
	case ctx.Err() != nil: // our task ended first: canceled, or stopped by the engine
		text = fmt.Sprintf("Our task ended (%v) before peer %s's task %s did", context.Cause(ctx), peer.Name, rec.RemoteTaskID)
	default:
		s.end(ctx, ec, rec, acceptance.Failed, yield, "The delegation failed: "+err.Error())
		return
	}
	if last != nil {
		text += "; that task is now " + stateWord(last.Status.State)
	}
	s.end(ctx, ec, rec, acceptance.Failed, yield, text+".")
}

// end fails our task with text, and records the delegation as ended
// with outcome and text as its reason, even when our task was canceled:
// the index must not show a finished delegation without an outcome. An
// agent that is stopping records nothing: it takes the delegation up
// again when it starts.
func (s *Delegate) end(ctx context.Context, ec *a2asrv.ExecutorContext, rec *delegation.Record,
	outcome acceptance.Outcome, yield func(a2a.Event, error) bool, text string) {
	if errors.Is(context.Cause(ctx), tasks.ErrShutdown) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, text)), nil)
		return
	}
	rec.Outcome, rec.Reason = outcome.String(), bounded(text)
	s.logEnd(ec, rec)
	if err := s.out.Index.Track(context.WithoutCancel(ctx), s.index(ec, rec)); err != nil {
		text += " The delegation could not be recorded: " + err.Error()
	}
	ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, text))
	ev.Metadata = rec.Metadata()
	yield(ev, nil)
}

// BlobKey marks, in a part's metadata, a raw part this agent stored as a
// blob: {"digest": "sha256:…", "size": N}. Only parts this agent wrote
// carry it (a peer's is removed), and GET /a2a/blobs serves only digests
// a part of the caller's task names under it.
const BlobKey = "handoff/blob"

// present returns the artifacts as our caller gets them: raw parts larger
// than the skill's threshold are stored as blobs and replaced by URL parts
// pointing at this agent (Outbound.BlobURL), keeping the part's filename
// and media type.
func (s *Delegate) present(ctx context.Context, ec *a2asrv.ExecutorContext, arts []*a2a.Artifact) ([]*a2a.Artifact, error) {
	threshold := s.spec.BlobThreshold
	out := make([]*a2a.Artifact, 0, len(arts))
	for _, a := range arts {
		if a == nil {
			continue
		}
		c := *a
		c.Parts = make([]*a2a.Part, 0, len(a.Parts))
		for _, p := range a.Parts {
			q := *p
			if _, forged := q.Metadata[BlobKey]; forged {
				q.Metadata = maps.Clone(q.Metadata)
				delete(q.Metadata, BlobKey)
			}
			if raw, ok := q.Content.(a2a.Raw); ok && int64(len(raw)) > threshold {
				digest, n, err := s.out.Artifacts.PutRaw(ctx, bytes.NewReader(raw), 0)
				if err != nil {
					return nil, fmt.Errorf("artifact %q: %w", a.Name, err)
				}
				q.Content = a2a.URL(s.out.BlobURL(ec.TaskID, ec.Tenant, digest))
				q.Metadata = maps.Clone(q.Metadata)
				if q.Metadata == nil {
					q.Metadata = map[string]any{}
				}
				q.Metadata[BlobKey] = map[string]any{"digest": digest, "size": n}
			}
			c.Parts = append(c.Parts, &q)
		}
		out = append(out, &c)
	}
	return out, nil
}

// keep stores the peer's final artifacts, whole (the peer's GetTask has
// assembled their chunks), content-addressed and bounded in size, and
// returns the digest of each named one. The collector hashes each once,
// for the store, the gate and its own check of the stream.
func keep(ctx context.Context, collect *artifacts.Collector, arts []*a2a.Artifact) (map[string]string, error) {
	kept, err := collect.Keep(ctx, arts)
	if err != nil {
		return nil, err
	}
	digests := make(map[string]string, len(arts))
	for i, a := range arts {
		if a == nil {
			continue
		}
		if _, seen := digests[a.Name]; a.Name != "" && !seen { // the gate reads the first of a name
			digests[a.Name] = kept[i]
		}
	}
	return digests, nil
}

// decide runs the gate on the peer's final task, checking an unknown
// decision again with backoff within the skill's bound; rec counts the
// re-checks, so the bound holds across restarts. ok is false when the task
// ended or should stop.
func (s *Delegate) decide(ctx context.Context, ec *a2asrv.ExecutorContext, rec *delegation.Record, final *a2a.Task,
	digests map[string]string, yield func(a2a.Event, error) bool) (acceptance.Decision, bool) {
	reverify := s.spec.Reverify
	for attempt := rec.GateAttempts; ; attempt++ {
		decision, err := s.out.Gate.Decide(ctx, s.id, acceptance.Completion{DelegationID: s.delegationID(ec), Peer: rec.Peer, RemoteTaskID: rec.RemoteTaskID,
			RemoteState: final.Status.State, RemoteMessage: messageText(final.Status.Message),
			Artifacts: final.Artifacts, Attempt: attempt, Digests: digests})
		if err != nil {
			s.end(ctx, ec, rec, acceptance.Unknown, yield, "The acceptance gate could not decide: "+err.Error())
			return decision, false
		}
		if decision.Outcome != acceptance.Unknown || decision.Settle || attempt >= reverify {
			return decision, true
		}
		// Unknown may be a verifier that could not answer: ask again later, within the bound.
		wait := acceptance.Backoff(attempt + 1)
		rec.GateAttempts = attempt + 1
		ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, agentText(ec,
			fmt.Sprintf("Acceptance unknown (%s); checking again in %s.", reasons(decision), wait)))
		ev.Metadata = rec.Metadata()
		if !yield(ev, nil) {
			return decision, false
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return decision, false
		}
	}
}

// reasons lists the gate's checks for a status message.
func reasons(d acceptance.Decision) string {
	var parts []string
	for _, c := range d.Reasons {
		mark := "ok"
		if !c.Passed {
			mark = "failed"
		}
		p := c.Name + " " + mark
		if c.Reason != "" {
			p += ": " + c.Reason
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// Cancel implements [a2asrv.AgentExecutor]; the engine cancels Execute's
// context, and the sender cancels the peer's task.
func (s *Delegate) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}
