// Package tracing sets up an agent's OpenTelemetry traces: a tracer
// provider exporting over OTLP as the standard OTEL_EXPORTER_OTLP_*
// variables configure it, W3C trace context propagation, and a log handler
// that adds the trace id to every log line written with a traced context.
//
// Tracing is off unless configured: with neither OTEL_EXPORTER_OTLP_ENDPOINT
// nor OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set (and OTEL_TRACES_EXPORTER not
// "otlp"), or with OTEL_SDK_DISABLED=true, [Setup] returns nil and nothing
// is wrapped, so an agent without tracing pays nothing for it.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// Tracing is one agent's tracer provider and propagator.
type Tracing struct {
	provider   *sdktrace.TracerProvider
	propagator propagation.TextMapPropagator
}

// configured reports whether the environment asks for traces.
func configured() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch strings.ToLower(os.Getenv("OTEL_TRACES_EXPORTER")) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup returns the tracing of the agent named service, exporting over
// OTLP/HTTP (protobuf) where the OTEL_EXPORTER_OTLP_* variables say, or nil
// when the environment does not ask for traces. OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES override and add to the resource.
func Setup(ctx context.Context, service string) (*Tracing, error) {
	if !configured() {
		return nil, nil
	}
	if p := os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" && p != "http/protobuf" {
		return nil, fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_PROTOCOL %q is not supported: use http/protobuf", p)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.NewSchemaless(semconv.ServiceName(service)), resource.Environment())
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	return &Tracing{
		provider:   sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)),
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}, nil
}

// Tracer returns the tracer of one instrumented part (its package path).
func (t *Tracing) Tracer(name string) trace.Tracer { return t.provider.Tracer(name) }

// Provider is the tracer provider, for packages that take one.
func (t *Tracing) Provider() trace.TracerProvider { return t.provider }

// Handler traces every request h serves, continuing the trace of an
// inbound traceparent header; name names the spans' operation.
func (t *Tracing) Handler(h http.Handler, name string) http.Handler {
	return otelhttp.NewHandler(h, name, otelhttp.WithTracerProvider(t.provider), otelhttp.WithPropagators(t.propagator),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }))
}

// Transport traces every request rt sends, and sends the trace on in a
// traceparent header.
func (t *Tracing) Transport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return otelhttp.NewTransport(rt, otelhttp.WithTracerProvider(t.provider), otelhttp.WithPropagators(t.propagator))
}

// Shutdown exports what is buffered and stops the provider.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.provider.Shutdown(ctx) }

// LogHandler adds trace_id and span_id to each record logged with a
// context that carries a span.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return l.Handler.Handle(ctx, r)
}

func (l logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(as)}
}
func (l logHandler) WithGroup(name string) slog.Handler { return logHandler{l.Handler.WithGroup(name)} }
