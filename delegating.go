package handoff

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/delegation"
	"github.com/handoff-a2a/handoff/mcp"
)

// delegating is the agent's outbound side: its verified peers, the sender
// that follows their tasks, and the gate that decides what to commit.
type delegating struct {
	peers  *delegation.Directory
	sender *delegation.Sender
	gate   *acceptance.Gate
	ledger *acceptance.BoltLedger
	self   func() delegation.Hop // this agent in a provenance chain
}

// newDelegating builds the outbound side when a skill delegates; nil otherwise.
func newDelegating(c *Config, t *tools, self func() delegation.Hop) (*delegating, error) {
	var contracts []*acceptance.Contract
	for _, s := range c.Skills {
		if s.Delegate == nil {
			continue
		}
		ct, err := acceptance.LoadContract(s.Delegate.Contract)
		if err != nil {
			return nil, fmt.Errorf("%s: skill %s: %w", c.path, s.ID, err)
		}
		if ct.Skill != s.ID {
			return nil, fmt.Errorf("%s: skill %s: contract %s is for skill %q", c.path, s.ID, s.Delegate.Contract, ct.Skill)
		}
		contracts = append(contracts, ct)
	}
	if len(contracts) == 0 {
		return nil, nil
	}
	dir, err := NewPeerDirectory(c)
	if err != nil {
		return nil, err
	}
	ledger, err := acceptance.OpenBoltLedger(filepath.Join(c.DataDir, "ledger.db"))
	if err != nil {
		return nil, err
	}
	var runner acceptance.ToolRunner = noTools{}
	if t != nil {
		runner = verifierTools{p: t.pipeline, m: t.manager}
	}
	gate, err := acceptance.NewGate(contracts, ledger, runner)
	if err != nil {
		ledger.Close()
		return nil, fmt.Errorf("%s: %w", c.path, err)
	}
	return &delegating{peers: dir, sender: delegation.NewSender(), gate: gate, ledger: ledger, self: self}, nil
}

// verifierTools runs the gate's verifier calls through the governed MCP
// pipeline, as the agent itself: a verifier tool needs a contract that
// allows it (read, low risk), like any other call.
type verifierTools struct {
	p *mcp.Pipeline
	m *mcp.Manager
}

func (v verifierTools) RunTool(ctx context.Context, tool string, args map[string]any) (any, error) {
	prop := mcp.Proposal{TaskID: "acceptance-gate", Principal: "handoff:gate", Tool: tool, Arguments: args}
	if snap := waitForTool(ctx, v.m, tool); snap != nil {
		prop.SnapshotVersion = snap.Version
	}
	res := v.p.Run(ctx, prop, nil)
	if res.Outcome != mcp.OutcomeSuccess {
		return nil, fmt.Errorf("verifier tool %s: %s", tool, res.Outcome)
	}
	return res.StructuredContent, nil
}

// noTools answers verifier calls when the agent has no MCP servers.
type noTools struct{}

func (noTools) RunTool(context.Context, string, map[string]any) (any, error) {
	return nil, errors.New("this agent has no MCP tools for verifiers")
}

// delegateSkill fulfils a skill with a verified peer and commits the peer's
// completion only when the acceptance gate does.
type delegateSkill struct {
	id  string
	cfg *DelegateConfig
	d   *delegating
}

var _ a2asrv.AgentExecutor = (*delegateSkill)(nil)

// Execute implements [a2asrv.AgentExecutor]: the peer's progress is
// streamed to our caller as working updates; our task completes only when
// the gate commits, else it fails with the gate's reasons.
func (s *delegateSkill) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask != nil {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, "A delegated task takes no further messages.")), nil)
			return
		}
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		peer, ok := s.d.peers.ForSkill(s.cfg.Skill, s.cfg.Tags...)
		if !ok { // a peer may have been refreshed since: look once more
			_ = s.d.peers.Refresh(ctx)
			peer, ok = s.d.peers.ForSkill(s.cfg.Skill, s.cfg.Tags...)
		}
		if !ok {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec,
				fmt.Sprintf("No verified peer offers skill %s; see handoff peers.", s.cfg.Skill))), nil)
			return
		}
		timeout := 5 * time.Minute
		if s.cfg.Timeout != nil {
			timeout = s.cfg.Timeout.Duration
		}
		env := (&delegation.Envelope{Actor: principalOf(ec), Tenant: ec.Tenant, Scopes: s.cfg.Scopes,
			Deadline: time.Now().Add(timeout).UTC(), IdempotencyKey: string(ec.TaskID)}).Next(s.d.self())
		if env.Actor == "" {
			env.Actor = "anonymous"
		}
		dctx, cancel := context.WithDeadline(ctx, env.Deadline)
		defer cancel()
		msg := a2a.NewMessage(a2a.MessageRoleUser, ec.Message.Parts...)
		stopped := false
		final, err := s.d.sender.Delegate(dctx, peer, msg, env, func(ev a2a.Event) {
			if stopped {
				return
			}
			if u, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && !u.Status.State.Terminal() {
				text := fmt.Sprintf("%s: %s", peer.Name, strings.ToLower(strings.TrimPrefix(string(u.Status.State), "TASK_STATE_")))
				if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, agentText(ec, text)), nil) {
					stopped = true
					cancel()
				}
			}
		})
		if stopped {
			return
		}
		if err != nil {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, "The delegation failed: "+err.Error())), nil)
			return
		}
		reverify := 2
		if s.cfg.Reverify != nil {
			reverify = *s.cfg.Reverify
		}
		var decision acceptance.Decision
		for attempt := 0; ; attempt++ {
			decision, err = s.d.gate.Decide(ctx, s.id, acceptance.Completion{DelegationID: string(ec.TaskID),
				RemoteState: final.Status.State, Artifacts: final.Artifacts, Attempt: attempt})
			if err != nil {
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, "The acceptance gate could not decide: "+err.Error())), nil)
				return
			}
			if decision.Outcome != acceptance.Unknown || decision.Settle || attempt >= reverify {
				break
			}
			// Unknown may be a verifier that could not answer: ask again later, within the bound.
			wait := acceptance.Backoff(attempt + 1)
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, agentText(ec,
				fmt.Sprintf("Acceptance unknown (%s); checking again in %s.", reasons(decision), wait))), nil) {
				return
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		if decision.Outcome != acceptance.Committed {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec,
				fmt.Sprintf("Not committed: %s (peer %s, task %s). %s", decision.Outcome, peer.Name, final.ID, reasons(decision)))), nil)
			return
		}
		for _, art := range final.Artifacts {
			ev := a2a.NewArtifactEvent(ec, art.Parts...)
			ev.Artifact.Name, ev.Artifact.Description = art.Name, art.Description
			if !yield(ev, nil) {
				return
			}
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, agentText(ec,
			fmt.Sprintf("Committed: peer %s's completion passed the contract (%s).", peer.Name, reasons(decision)))), nil)
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
func (s *delegateSkill) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}
