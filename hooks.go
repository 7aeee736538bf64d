package handoff

import (
	"context"
	"fmt"
	"log/slog"
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

// gateDecided tells the gate_decided hooks of a decision of either gate
// (acceptance.WithDecided): a delegation's, with the peer and its task, or
// a skill's own result's (output.contract), with every check.
func (h *hookObservers) gateDecided(_ context.Context, skillID string, c acceptance.Completion, d acceptance.Decision) {
	if !h.obs.Wants(mcp.HookGateDecided) {
		return
	}
	task, _, _ := strings.Cut(c.DelegationID, "#") // a Go executor's delegation is TASK#SKILL-N, a result TASK#output
	ev := mcp.GateHookEvent{DelegationID: c.DelegationID, TaskID: task, Skill: skillID, Peer: c.Peer, RemoteTaskID: c.RemoteTaskID,
		Outcome: d.Outcome.String(), Time: time.Now().UTC()}
	var failed []string
	for _, r := range d.Reasons {
		ev.Checks = append(ev.Checks, mcp.HookCheck{Name: r.Name, Passed: r.Passed, Reason: r.Reason})
		if !r.Passed {
			failed = append(failed, r.Name+": "+r.Reason)
		}
	}
	ev.Reason = strings.Join(failed, "; ")
	h.obs.Notify(ev)
}

// hookedIndex tells the gate_decided hooks of a delegation that failed
// before the gate could decide (the peer failed, refused or could not be
// followed); the gate's own decisions come by gateDecided.
type hookedIndex struct {
	skill.Index
	hooks *hookObservers
}

func (x hookedIndex) Track(ctx context.Context, d *acceptance.Delegation) error {
	err := x.Index.Track(ctx, d)
	if d.Outcome == acceptance.Failed.String() && x.hooks.obs.Wants(mcp.HookGateDecided) {
		task, _, _ := strings.Cut(d.TaskID, "#")
		x.hooks.obs.Notify(mcp.GateHookEvent{DelegationID: d.TaskID, TaskID: task, Skill: d.Skill, Peer: d.Peer,
			RemoteTaskID: d.RemoteTaskID, Outcome: d.Outcome, Reason: d.Reason, Time: d.Updated.UTC()})
	}
	return err
}
