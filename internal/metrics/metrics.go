// Package metrics holds an agent's Prometheus metrics: one registry, the
// collectors, and the handler that serves them in the exposition format.
//
// A [Registry] is the observer every instrumented package declares for
// itself (a2ahttp.Observer, tasks.Observer, push.Observer): those packages
// never import Prometheus. Labels are low-cardinality only (method,
// binding, outcome, state, skill, peer, tool, server); no task id, context
// id or principal is ever a label.
package metrics

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry is one agent's metrics. Its methods are safe for concurrent use.
type Registry struct {
	reg *prometheus.Registry

	requests       *prometheus.CounterVec
	requestSeconds *prometheus.HistogramVec

	transitions   *prometheus.CounterVec
	appendSeconds prometheus.Histogram
	appendEvents  prometheus.Histogram
	appendErrors  prometheus.Counter

	pushAttempts *prometheus.CounterVec
	pushSeconds  prometheus.Histogram
	pushLag      prometheus.Histogram
	pushRetries  *prometheus.CounterVec

	toolCalls   *prometheus.CounterVec
	toolSeconds *prometheus.HistogramVec

	delegations *prometheus.CounterVec
	gate        *prometheus.CounterVec

	modelCalls   *prometheus.CounterVec
	modelSeconds *prometheus.HistogramVec
	modelTokens  *prometheus.CounterVec
}

// New returns a Registry with every collector registered, and the Go
// runtime's and the process's.
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry()}
	r.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "handoff_a2a_requests_total",
		Help: "A2A requests answered, by method, binding (jsonrpc, rest, grpc) and outcome (ok, or the A2A error).",
	}, []string{"method", "binding", "outcome"})
	r.requestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "handoff_a2a_request_duration_seconds",
		Help:    "Time to answer an A2A request (a stream: until it ended), by method and binding.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"method", "binding"})
	r.transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "handoff_task_transitions_total",
		Help: "Tasks that entered a state, as stored, by state.",
	}, []string{"state"})
	r.appendSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "handoff_store_append_duration_seconds",
		Help:    "Time for the task store to make one append durable.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
	})
	r.appendEvents = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "handoff_store_append_events",
		Help:    "Events written by one append (the engine groups what an executor yields while the last append was in flight).",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
	})
	r.appendErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "handoff_store_append_errors_total",
		Help: "Appends the task store refused or failed (a full disk included).",
	})
	r.pushAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "handoff_push_attempts_total",
		Help: "Push delivery attempts, by outcome: delivered, retry (failed, to be tried again) or dead (failed, given up: a dead letter).",
	}, []string{"outcome"})
	r.pushSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "handoff_push_attempt_duration_seconds",
		Help:    "Time of one push delivery attempt (the webhook's POST).",
		Buckets: prometheus.DefBuckets,
	})
	r.pushLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "handoff_push_delivery_lag_seconds",
		Help:    "Time from a status update to its delivery to a webhook (status updates only: other events carry no time).",
		Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 30, 60, 300, 3600},
	})
	r.pushRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "handoff_push_retries_total",
		Help: "Operators' requests to retry push deliveries, one per event, by outcome: delivered (a dead letter sent again and taken), failed (sent again and refused: it stays dead), now (a retrying delivery tried at once) or stale (delivered already).",
	}, []string{"outcome"})
	r.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "handoff_tool_calls_total",
		Help: "Tool calls through the governed pipeline, by tool (server__tool), policy decision and outcome.",
	}, []string{"tool", "decision", "outcome"})
	r.toolSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "handoff_tool_call_duration_seconds",
		Help:    "Time of one tool call through the pipeline (policy, approval check, the MCP call, audit), by tool.",
		Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 30, 120},
	}, []string{"tool"})
	r.delegations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "handoff_delegations_total",
		Help: "Delegations started, by local skill and peer.",
	}, []string{"skill", "peer"})
	r.gate = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "handoff_gate_decisions_total",
		Help: "Acceptance gate decisions on delegated completions (committed, rejected, failed, unknown), by skill and peer; a re-check is a decision of its own.",
	}, []string{"skill", "peer", "decision"})
	r.modelCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "handoff_model_requests_total",
		Help: "Chat Completions round trips to a model endpoint (its retries included), by model (models[].name) and outcome.",
	}, []string{"model", "outcome"})
	r.modelSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "handoff_model_request_duration_seconds",
		Help:    "Time of one round trip to a model endpoint, retries included, by model.",
		Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"model"})
	r.modelTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "handoff_model_tokens_total",
		Help: "Tokens the model endpoints report, by model and kind (prompt, completion).",
	}, []string{"model", "kind"})
	r.reg.MustRegister(r.toolCalls, r.toolSeconds, r.delegations, r.gate, r.modelCalls, r.modelSeconds, r.modelTokens)
	r.reg.MustRegister(r.requests, r.requestSeconds, r.transitions, r.appendSeconds, r.appendEvents, r.appendErrors,
		r.pushAttempts, r.pushSeconds, r.pushLag, r.pushRetries,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Handler serves the registry in the Prometheus exposition format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}

// Request implements a2ahttp.Observer.
func (r *Registry) Request(method, binding string, err error, d time.Duration) {
	r.requests.WithLabelValues(method, binding, Outcome(err)).Inc()
	r.requestSeconds.WithLabelValues(method, binding).Observe(d.Seconds())
}

// TaskState implements tasks.Observer.
func (r *Registry) TaskState(s a2a.TaskState) {
	r.transitions.WithLabelValues(stateLabel(s)).Inc()
}

// StoreAppend implements tasks.Observer.
func (r *Registry) StoreAppend(events int, err error, d time.Duration) {
	if err != nil {
		r.appendErrors.Inc()
		return
	}
	r.appendSeconds.Observe(d.Seconds())
	r.appendEvents.Observe(float64(events))
}

// DeliveryAttempt implements push.Observer.
func (r *Registry) DeliveryAttempt(outcome string, d, lag time.Duration) {
	r.pushAttempts.WithLabelValues(outcome).Inc()
	r.pushSeconds.Observe(d.Seconds())
	if outcome == "delivered" && lag > 0 {
		r.pushLag.Observe(lag.Seconds())
	}
}

// Retried implements push.RetryObserver.
func (r *Registry) Retried(outcome string) {
	r.pushRetries.WithLabelValues(outcome).Inc()
}

// ToolCall reports one call through the governed pipeline.
func (r *Registry) ToolCall(tool, decision, outcome string, d time.Duration) {
	if decision == "" {
		decision = "none" // the call ended before the policy answered
	}
	r.toolCalls.WithLabelValues(tool, decision, outcome).Inc()
	r.toolSeconds.WithLabelValues(tool).Observe(d.Seconds())
}

// ModelCall reports one round trip to the model endpoint named model.
func (r *Registry) ModelCall(model string, err error, d time.Duration, promptTokens, completionTokens int64) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	r.modelCalls.WithLabelValues(model, outcome).Inc()
	r.modelSeconds.WithLabelValues(model).Observe(d.Seconds())
	r.modelTokens.WithLabelValues(model, "prompt").Add(float64(promptTokens))
	r.modelTokens.WithLabelValues(model, "completion").Add(float64(completionTokens))
}

// DelegationStarted reports a delegation sent to peer for skill.
func (r *Registry) DelegationStarted(skill, peer string) {
	r.delegations.WithLabelValues(skill, peer).Inc()
}

// GateDecided reports a gate decision on a delegated completion.
func (r *Registry) GateDecided(skill, peer, decision string) {
	r.gate.WithLabelValues(skill, peer, decision).Inc()
}

// ServerHealth is one MCP server's health at a scrape.
type ServerHealth struct {
	// Name is the server's configured name.
	Name string
	// Up is true while the server is connected.
	Up bool
	// Tools counts the server's tools in the current catalog snapshot.
	Tools int
}

// WatchServers has every scrape report the MCP servers f returns:
// handoff_mcp_server_up and handoff_mcp_server_tools, by server.
func (r *Registry) WatchServers(f func() []ServerHealth) error {
	return r.reg.Register(serverCollector{f})
}

var (
	serverUp    = prometheus.NewDesc("handoff_mcp_server_up", "1 while the MCP server is connected, 0 otherwise.", []string{"server"}, nil)
	serverTools = prometheus.NewDesc("handoff_mcp_server_tools", "Tools of the MCP server in the current catalog snapshot.", []string{"server"}, nil)
)

// serverCollector reads the servers' health at each scrape.
type serverCollector struct{ f func() []ServerHealth }

func (c serverCollector) Describe(ch chan<- *prometheus.Desc) { ch <- serverUp; ch <- serverTools }

func (c serverCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.f() {
		up := 0.0
		if s.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(serverUp, prometheus.GaugeValue, up, s.Name)
		ch <- prometheus.MustNewConstMetric(serverTools, prometheus.GaugeValue, float64(s.Tools), s.Name)
	}
}

// outcomes names the A2A errors a request can end with; anything else is
// "error", so the label's values stay a fixed, small set.
var outcomes = []struct {
	err  error
	name string
}{
	{a2a.ErrTaskNotFound, "task_not_found"},
	{a2a.ErrTaskNotCancelable, "task_not_cancelable"},
	{a2a.ErrInvalidParams, "invalid_params"},
	{a2a.ErrInvalidRequest, "invalid_request"},
	{a2a.ErrParseError, "parse_error"},
	{a2a.ErrMethodNotFound, "method_not_found"},
	{a2a.ErrUnsupportedOperation, "unsupported_operation"},
	{a2a.ErrUnsupportedContentType, "unsupported_content_type"},
	{a2a.ErrPushNotificationNotSupported, "push_not_supported"},
	{a2a.ErrExtendedCardNotConfigured, "extended_card_not_configured"},
	{a2a.ErrVersionNotSupported, "version_not_supported"},
	{a2a.ErrUnauthenticated, "unauthenticated"},
	{a2a.ErrUnauthorized, "unauthorized"},
	{a2a.ErrInvalidAgentResponse, "invalid_agent_response"},
	{a2a.ErrInternalError, "internal"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "deadline_exceeded"},
}

// Outcome is the outcome label of a request that ended with err.
func Outcome(err error) string {
	if err == nil {
		return "ok"
	}
	for _, o := range outcomes {
		if errors.Is(err, o.err) {
			return o.name
		}
	}
	return "error"
}

// stateLabel is a task state's label: "completed", "input_required", ...
// (TASK_STATE_INPUT_REQUIRED lowercased, without its prefix).
func stateLabel(s a2a.TaskState) string {
	return strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_"))
}
