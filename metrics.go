package handoff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/internal/metrics"
	"github.com/handoff-a2a/handoff/internal/model"
	"github.com/handoff-a2a/handoff/internal/tracing"
	"github.com/handoff-a2a/handoff/mcp"
)

// MetricsConfig is the metrics section: Prometheus metrics of the agent's
// requests, tasks, store, push deliveries, tool calls, delegations and MCP
// servers (README, "Metrics").
type MetricsConfig struct {
	// Enabled serves the metrics. Default true.
	Enabled *bool `yaml:"enabled"`
	// Listen serves them on an address of their own (say 127.0.0.1:9464),
	// without authentication, instead of at /metrics of the agent's
	// listener behind its authentication.
	Listen string `yaml:"listen"`
}

// on reports whether the metrics are served.
func (m *MetricsConfig) on() bool { return m.Enabled == nil || *m.Enabled }

// validate checks the metrics section.
func (m *MetricsConfig) validate() error {
	if m.Listen == "" {
		return nil
	}
	if !m.on() {
		return errors.New("is set but metrics are not enabled")
	}
	if _, _, err := net.SplitHostPort(m.Listen); err != nil {
		return fmt.Errorf("%q is not a host:port address: %w", m.Listen, err)
	}
	return nil
}

// telemetry is what the agent reports to: its metrics (nil when off) and
// its traces (nil unless the OTEL_* environment asks for them).
type telemetry struct {
	metrics *metrics.Registry
	tracing *tracing.Tracing
}

// newTelemetry returns the agent's metrics and tracing.
func newTelemetry(ctx context.Context, c *Config) (telemetry, error) {
	var t telemetry
	if c.Metrics.on() {
		t.metrics = metrics.New()
	}
	tr, err := tracing.Setup(ctx, c.Name)
	if err != nil {
		return t, err
	}
	t.tracing = tr
	return t, nil
}

// tracer is the root package's tracer, nil without tracing.
func (t telemetry) tracer() trace.Tracer {
	if t.tracing == nil {
		return nil
	}
	return t.tracing.Tracer("github.com/handoff-a2a/handoff")
}

// serverHealth is each MCP server's state and tool count, for a scrape.
func serverHealth(m *mcp.Manager) []metrics.ServerHealth {
	tools := map[string]int{}
	for _, t := range m.Snapshot().Tools {
		tools[t.Server]++
	}
	var out []metrics.ServerHealth
	for _, s := range m.Servers() {
		out = append(out, metrics.ServerHealth{Name: s.Name, Up: s.State == mcp.StateReady, Tools: tools[s.Name]})
	}
	return out
}

// observedAudit reports each audit record, one per call through the
// pipeline, as it is appended: to the metrics, and as a span of the call
// (from the record's start and duration) under the task's execution.
type observedAudit struct {
	auditLog
	m      *metrics.Registry // nil: no metrics
	tracer trace.Tracer      // nil: no spans
}

func (o observedAudit) Append(ctx context.Context, rec *mcp.AuditRecord) error {
	err := o.auditLog.Append(ctx, rec)
	if o.m != nil {
		o.m.ToolCall(rec.Tool, string(rec.Decision), string(rec.Outcome), rec.Duration)
	}
	if o.tracer != nil {
		_, span := o.tracer.Start(ctx, "mcp.call "+rec.Tool, trace.WithTimestamp(rec.Time), trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("mcp.tool", rec.Tool), attribute.String("handoff.policy_decision", string(rec.Decision)),
				attribute.String("handoff.outcome", string(rec.Outcome)), attribute.String("mcp.snapshot_version", rec.SnapshotVersion)))
		if rec.Outcome != mcp.OutcomeSuccess {
			span.SetStatus(codes.Error, rec.Reason)
		}
		span.End(trace.WithTimestamp(rec.Time.Add(rec.Duration)))
	}
	return err
}

// observedModel reports each round trip to a model endpoint: its outcome,
// its time and the tokens the endpoint says it used.
type observedModel struct {
	next model.Completer
	name string // the models[].name, a label
	m    *metrics.Registry
}

func (o observedModel) Complete(ctx context.Context, r model.Request) (model.Reply, error) {
	start := time.Now()
	rep, err := o.next.Complete(ctx, r)
	o.m.ModelCall(o.name, err, time.Since(start), rep.Usage.PromptTokens, rep.Usage.CompletionTokens)
	return rep, err
}

// observedIndex reports delegations as the delegate skill indexes them: a
// new one when it is first written, a gate decision each time one is. With
// tracing, each delegation this process saw start becomes a span,
// handoff.delegation, from its start to the gate's decision, under the
// task's execution (one resumed after a restart has no start here, and no
// span: its execution's span covers it).
type observedIndex struct {
	commitLedger
	m      *metrics.Registry // nil: no metrics
	tracer trace.Tracer      // nil: no spans
	starts sync.Map          // delegation id → time.Time it started
}

func (o *observedIndex) Track(ctx context.Context, d *acceptance.Delegation) error {
	err := o.commitLedger.Track(ctx, d)
	switch {
	case d.Outcome != "":
		if o.m != nil {
			o.m.GateDecided(d.Skill, d.Peer, d.Outcome)
		}
		if start, ok := o.starts.LoadAndDelete(d.TaskID); ok && o.tracer != nil {
			_, span := o.tracer.Start(ctx, "handoff.delegation", trace.WithTimestamp(start.(time.Time)), trace.WithSpanKind(trace.SpanKindInternal),
				trace.WithAttributes(attribute.String("handoff.skill", d.Skill), attribute.String("handoff.peer", d.Peer),
					attribute.String("handoff.delegation_id", d.TaskID), attribute.String("handoff.remote_task_id", d.RemoteTaskID),
					attribute.String("handoff.gate.outcome", d.Outcome)))
			if d.Outcome != acceptance.Committed.String() {
				span.SetStatus(codes.Error, d.Reason)
			}
			span.End()
		}
	case d.RemoteTaskID == "" && d.RemoteState == "":
		if o.m != nil {
			o.m.DelegationStarted(d.Skill, d.Peer)
		}
		if o.tracer != nil {
			o.starts.Store(d.TaskID, time.Now())
		}
	}
	return err
}

// serveMetrics serves /metrics on the metrics section's own address until
// ctx ends. It returns once the listener is bound, or its error.
func (a *Agent) serveMetrics(ctx context.Context) (wait func(), err error) {
	ln, err := net.Listen("tcp", a.cfg.Metrics.Listen)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.metrics.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("metrics server stopped", slog.Any("error", err))
		}
	}()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	a.log.Info("metrics serving", slog.String("address", ln.Addr().String()))
	return func() { <-done }, nil
}
