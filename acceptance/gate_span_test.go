package acceptance_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/handoff-a2a/handoff/acceptance"
)

// spanTools is a ToolRunner that records the span each verifier call runs
// under.
type spanTools struct {
	tools
	parents []trace.SpanID
}

func (s *spanTools) RunTool(ctx context.Context, tool string, args map[string]any) (any, error) {
	s.parents = append(s.parents, trace.SpanContextFromContext(ctx).SpanID())
	return s.tools.RunTool(ctx, tool, args)
}

// TestDecideSpan: with a tracer provider, each decision is a span,
// handoff.gate.decide, under the caller's span, with the skill, the peer,
// the outcome and the checks; a commit is no error, a rejection is one, and
// the verifier runs under the decision's span.
func TestDecideSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	tr := &spanTools{tools: tools{result: settled()}}
	g := newGate(t, openLedger(t), tr, acceptance.WithTracerProvider(tp))

	ctx, parent := tp.Tracer("test").Start(t.Context(), "handoff.task.execute")
	honest := completed(receipt(nil))
	honest.Peer = "payments"
	if d, err := g.Decide(ctx, "refund", honest); err != nil || d.Outcome != acceptance.Committed {
		t.Fatalf("honest: %+v, %v", d, err)
	}
	lying := completed(receipt(func(m map[string]any) { m["amount_cents"] = 9999 }))
	lying.DelegationID, lying.Peer = "d-2", "payments"
	if d, err := g.Decide(ctx, "refund", lying); err != nil || d.Outcome != acceptance.Rejected {
		t.Fatalf("lying: %+v, %v", d, err)
	}
	parent.End()

	var decides []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "handoff.gate.decide" {
			decides = append(decides, s)
		}
	}
	if len(decides) != 2 {
		t.Fatalf("%d decision spans, want 2", len(decides))
	}
	for i, want := range []struct {
		outcome string
		status  codes.Code
	}{{"committed", codes.Unset}, {"rejected", codes.Error}} {
		s := decides[i]
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value
		}
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("decision %d: parent %s, want the caller's span", i, s.Parent().SpanID())
		}
		if attrs["handoff.skill"].AsString() != "refund" || attrs["handoff.peer"].AsString() != "payments" ||
			attrs["handoff.gate.outcome"].AsString() != want.outcome || attrs["handoff.gate.checks"].AsInt64() == 0 {
			t.Errorf("decision %d: attributes %v, want skill refund, peer payments, %s, some checks", i, attrs, want.outcome)
		}
		if s.Status().Code != want.status {
			t.Errorf("decision %d: status %v, want %v", i, s.Status(), want.status)
		}
		if len(tr.parents) > i && tr.parents[i] != s.SpanContext().SpanID() {
			t.Errorf("verifier call %d ran under span %s, not its decision's", i, tr.parents[i])
		}
	}
	if len(tr.parents) != 2 {
		t.Errorf("%d verifier calls, want 2", len(tr.parents))
	}
}
