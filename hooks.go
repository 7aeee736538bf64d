package handoff

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/internal/skill"
	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/tasks"
)

// observerPoints are the hook points outside a tool call's road.
var observerPoints = []mcp.HookPoint{mcp.HookTaskCreated, mcp.HookTaskFinished, mcp.HookGateDecided}

// hookObservers runs the policy's task_created, task_finished and
// gate_decided hooks: it is the engine's lifecycle observer, and
// [hookedIndex] tells it of each gate decision. Hooks run off the caller's
// goroutine ([mcp.Observers]): the engine's writer never waits for one.
type hookObservers struct {
	obs        *mcp.Observers
	log        *slog.Logger
	firstSkill string // the skill a task that names none runs (skill.Router's default)
}

func newHookObservers(c *Config, log *slog.Logger) (*hookObservers, error) {
	obs, err := mcp.NewObservers(configHooks(c, observerPoints...), mcp.ObserversConfig{Client: hookClient(c), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("%s: policy.hooks: %w", c.path, err)
	}
	h := &hookObservers{obs: obs, log: log}
	if s := allSkills(c); len(s) > 0 {
		h.firstSkill = s[0].ID
	}
	return h, nil
}

// reload replaces the hooks with next's; events already queued run under
// the old ones.
func (h *hookObservers) reload(next *Config) error {
	if err := h.obs.Reconfigure(configHooks(next, observerPoints...)); err != nil {
		return fmt.Errorf("%s: policy.hooks: %w", next.path, err)
	}
	return nil
}

// close stops the hooks, waiting for the one running.
func (h *hookObservers) close() { h.obs.Close() }

// TaskCreated implements [tasks.LifecycleObserver].
func (h *hookObservers) TaskCreated(snap *tasks.Snapshot, state a2a.TaskState) {
	if h.obs.Wants(mcp.HookTaskCreated) {
		h.obs.Notify(h.taskEvent(mcp.HookTaskCreated, snap, state))
	}
}

// TaskFinished implements [tasks.LifecycleObserver].
func (h *hookObservers) TaskFinished(snap *tasks.Snapshot) {
	if h.obs.Wants(mcp.HookTaskFinished) {
		ev := h.taskEvent(mcp.HookTaskFinished, snap, snap.Task.Status.State)
		if m := snap.Task.Status.Message; m != nil {
			ev.Status = statusText(m)
		}
		h.obs.Notify(ev)
	}
}

func (h *hookObservers) taskEvent(point mcp.HookPoint, snap *tasks.Snapshot, state a2a.TaskState) mcp.TaskHookEvent {
	t := snap.Task
	return mcp.TaskHookEvent{Point: point, TaskID: string(t.ID), ContextID: t.ContextID, Principal: snap.Owner.Principal,
		Tenant: snap.Owner.Tenant, Skill: h.skillOf(t), State: string(state), Time: time.Now().UTC()}
}

// skillOf is the skill t runs, chosen as skill.Router chooses it: the
// task's metadata, its first message's, else the first skill.
func (h *hookObservers) skillOf(t *a2a.Task) string {
	if id, ok := t.Metadata[skill.MetadataKey].(string); ok && id != "" {
		return id
	}
	if len(t.History) > 0 && t.History[0] != nil {
		if id, ok := t.History[0].Metadata[skill.MetadataKey].(string); ok && id != "" {
			return id
		}
	}
	return h.firstSkill
}

// hookedIndex tells the gate_decided hooks of each decision as the
// delegate skill indexes it: a record with an outcome is one (as
// observedIndex counts them).
type hookedIndex struct {
	skill.Index
	ledger acceptance.Ledger // a commit's checks are read back from its entry
	hooks  *hookObservers
}

func (x hookedIndex) Track(ctx context.Context, d *acceptance.Delegation) error {
	err := x.Index.Track(ctx, d)
	if d.Outcome != "" && x.hooks.obs.Wants(mcp.HookGateDecided) {
		x.hooks.obs.Notify(x.gateEvent(ctx, d))
	}
	return err
}

func (x hookedIndex) gateEvent(ctx context.Context, d *acceptance.Delegation) mcp.GateHookEvent {
	task, _, _ := strings.Cut(d.TaskID, "#") // a Go executor's delegation is TASK#SKILL-N
	ev := mcp.GateHookEvent{DelegationID: d.TaskID, TaskID: task, Skill: d.Skill, Peer: d.Peer, RemoteTaskID: d.RemoteTaskID,
		Outcome: d.Outcome, Reason: d.Reason, Time: d.Updated.UTC()}
	if d.Outcome != acceptance.Committed.String() {
		ev.Checks = failedChecks(d.Reason)
		return ev
	}
	e, err := x.ledger.Get(ctx, d.TaskID)
	if err != nil {
		x.hooks.log.Warn("gate_decided hooks: the commit's checks were not read", slog.String("delegation_id", d.TaskID), slog.Any("error", err))
		return ev
	}
	for _, name := range slices.Sorted(maps.Keys(e.EvidenceDigests)) {
		ev.Checks = append(ev.Checks, mcp.HookCheck{Name: "artifact " + name, Passed: true})
	}
	for _, v := range e.Verifiers {
		ev.Checks = append(ev.Checks, mcp.HookCheck{Name: v.Name, Passed: v.Passed, Reason: v.Reason})
	}
	return ev
}

// checkPrefixes start the names of the gate's checks (acceptance.Check).
var checkPrefixes = []string{"artifact ", "requires ", "freshness ", "verifier "}

// failedChecks reads the checks that did not pass back from a delegation's
// reason, which lists them as "NAME: REASON; NAME: REASON". A reason that
// is not such a list (a delegation that ended before the gate, in words of
// its own) gives none.
func failedChecks(reason string) []mcp.HookCheck {
	var out []mcp.HookCheck
	for part := range strings.SplitSeq(reason, "; ") {
		name, why, _ := strings.Cut(part, ": ")
		known := name == "remote" || slices.ContainsFunc(checkPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
		switch {
		case known:
			out = append(out, mcp.HookCheck{Name: name, Reason: why})
		case len(out) > 0: // "; " inside a check's reason
			out[len(out)-1].Reason += "; " + part
		default:
			return nil
		}
	}
	return out
}
