package handoff

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/artifacts"
	"github.com/handoff-a2a/handoff/delegation"
	"github.com/handoff-a2a/handoff/internal/datadir"
	"github.com/handoff-a2a/handoff/internal/skill"
)

// delegating is the agent's outbound side as the agent holds it: what the
// delegate skills use ([skill.Outbound]), and the stores behind it that the
// agent's own routes read and Close closes.
type delegating struct {
	out    *skill.Outbound
	ledger commitLedger
	// artifacts holds the peers' artifacts by digest (DATA_DIR/artifacts);
	// GET /a2a/blobs serves the large raw parts from it.
	artifacts *artifacts.Store
	// base is the agent's public URL, known once its routes are built:
	// blob URLs in the artifacts passed to callers point at it.
	base atomic.Pointer[string]
}

// commitLedger is the commit ledger with the index of delegations and Close:
// bbolt in the data directory, or Redis.
type commitLedger interface {
	acceptance.Ledger
	Track(ctx context.Context, d *acceptance.Delegation) error
	Delegations(ctx context.Context) ([]*acceptance.Delegation, error)
	Close() error
}

// openLedger opens the ledger on rdb (the task store's Redis, shared by the
// replicas, so a delegation commits once whichever replica runs it) or,
// with none, in the data directory.
func openLedger(c *Config, rdb redis.UniversalClient) (commitLedger, error) {
	if rdb != nil {
		return acceptance.NewRedisLedger(rdb, c.Store.Namespace)
	}
	return acceptance.OpenBoltLedger(filepath.Join(c.DataDir, datadir.Ledger))
}

// newDelegating builds the outbound side when a skill delegates; nil
// otherwise. rdb is the task store's Redis, nil on the embedded store; log
// hears of peers refused or unreachable, and of each delegation's end;
// hooks of each gate decision.
func newDelegating(c *Config, rdb redis.UniversalClient, t *tools, log *slog.Logger, self func() delegation.Hop, tel telemetry,
	hooks *hookObservers) (*delegating, error) {
	// The skills' own results (output.contract) pass a gate of their own,
	// into the same ledger: a delegate skill may have both contracts.
	var contracts, outputs []*acceptance.Contract
	load := func(s SkillConfig, file string) (*acceptance.Contract, error) {
		ct, err := acceptance.LoadContract(file)
		if err != nil {
			return nil, fmt.Errorf("%s: skill %s: %w", c.path, s.ID, err)
		}
		if ct.Skill != s.ID {
			return nil, fmt.Errorf("%s: skill %s: contract %s is for skill %q", c.path, s.ID, file, ct.Skill)
		}
		return ct, nil
	}
	for _, s := range allSkills(c) {
		if s.Delegate != nil {
			ct, err := load(s, s.Delegate.Contract)
			if err != nil {
				return nil, err
			}
			contracts = append(contracts, ct)
		}
		if s.Output != nil && s.Output.Contract != "" {
			ct, err := load(s, c.relative(s.Output.Contract))
			if err != nil {
				return nil, err
			}
			outputs = append(outputs, ct)
		}
	}
	if len(contracts) == 0 && len(outputs) == 0 {
		return nil, nil
	}
	dir, err := NewPeerDirectory(c, delegation.WithLogger(log))
	if err != nil {
		return nil, err
	}
	arts, err := artifacts.NewStore(c.artifactsDir())
	if err != nil {
		return nil, err
	}
	ledger, err := openLedger(c, rdb)
	if err != nil {
		return nil, err
	}
	gateOpts := []acceptance.Option{acceptance.WithDecided(hooks.gateDecided)}
	if tel.tracing != nil { // each decision a span, its verifiers' calls under it
		gateOpts = append(gateOpts, acceptance.WithTracerProvider(tel.tracing.Provider()))
	}
	gate, err := acceptance.NewGate(contracts, ledger, skill.GateTools(t.governed()), gateOpts...)
	if err != nil {
		ledger.Close()
		return nil, fmt.Errorf("%s: %w", c.path, err)
	}
	var results *acceptance.Gate
	if len(outputs) > 0 {
		if results, err = acceptance.NewGate(outputs, ledger, skill.GateTools(t.governed()), gateOpts...); err != nil {
			ledger.Close()
			return nil, fmt.Errorf("%s: %w", c.path, err)
		}
	}
	d := &delegating{ledger: ledger, artifacts: arts}
	var index skill.Index = ledger
	if tel.metrics != nil || tel.tracing != nil {
		index = &observedIndex{commitLedger: ledger, m: tel.metrics, tracer: tel.tracer()}
	}
	index = hookedIndex{Index: index, hooks: hooks}
	var sopts []delegation.SenderOption
	if tel.tracing != nil { // each request to a peer a span, its traceparent sent on
		sopts = append(sopts, delegation.WithTransport(tel.tracing.Transport(nil)))
	}
	d.out = &skill.Outbound{Peers: dir, Sender: delegation.NewSender(sopts...), Gate: gate, Results: results, Index: index, Artifacts: arts,
		Self: self, BlobURL: d.blobURL, Log: log}
	return d, nil
}

// blobURL is where the blob digest of task (of tenant) is served, under
// the agent's base URL (see blobPart).
func (d *delegating) blobURL(task a2a.TaskID, tenant, digest string) string {
	base := ""
	if b := d.base.Load(); b != nil {
		base = *b
	}
	return blobURL(base, task, tenant, digest)
}

// envelopeKey is the idempotency key of a message's delegation envelope:
// the engine gives a caller's repeated key the task it already started. A
// malformed envelope has none here; checkEnvelope refuses it before.
func envelopeKey(m *a2a.Message) string {
	env, ok, err := delegation.EnvelopeFrom(m)
	if !ok || err != nil {
		return ""
	}
	return env.IdempotencyKey
}
