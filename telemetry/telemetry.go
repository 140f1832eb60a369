// Package telemetry installs OpenTelemetry tracing for a Checkout Lab process: the shop and
// the standalone fake gateway call Setup once, at start, from their serve command.
//
// Traces are for the people tuning the shop: where a checkout's milliseconds go (its phases,
// the gateway call, the webhook and the jobs that follow). The journal stays the story a user
// reads; nothing in it depends on tracing.
//
// Tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT is set. Off, Setup installs only the W3C
// propagator, so a traceparent that arrives is still passed on, and the global TracerProvider
// stays OpenTelemetry's no-op: a span records nothing, and a request's costs about 1.5 µs
// and five small allocations (handlers.BenchmarkTracingOff), against the 6–7 ms of a
// checkout. That matters to `shop bench`, which compares shops and must not measure tracing.
//
// The code that makes spans never holds a TracerProvider of its own: it asks the global one
// (otel.Tracer) each time. So whatever installs a provider before a stack starts — Setup for
// `serve`, a test's in-memory recorder, `shop bench` — receives the spans.
package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// EndpointVar turns tracing on: the base URL of an OTLP/HTTP collector, e.g.
// http://jaeger:4318 (spans go to its /v1/traces). The exporter also honours the other
// standard OTEL_EXPORTER_OTLP_* variables (headers, timeout, a traces-only endpoint).
const EndpointVar = "OTEL_EXPORTER_OTLP_ENDPOINT"

// Vars are the environment variables Setup reads, for a check that a deployment's
// environment names only variables something reads (cmd/shop's compose test).
var Vars = []string{EndpointVar}

// Setup installs the W3C propagator (traceparent, tracestate and baggage) as the global one
// and, when OTEL_EXPORTER_OTLP_ENDPOINT is set, a TracerProvider that batches spans to it over
// OTLP/HTTP as the global TracerProvider, for serviceName ("shop", "fakegateway"). It returns
// the function that flushes and stops the exporter; call it at shutdown. Without the variable
// it leaves the global TracerProvider alone and the shutdown does nothing. It returns an error
// for an endpoint the exporter cannot use.
func Setup(ctx context.Context, serviceName string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if strings.TrimSpace(os.Getenv(EndpointVar)) == "" {
		return func(context.Context) error { return nil }, nil
	}
	// The exporter reads the endpoint (and any OTEL_EXPORTER_OTLP_HEADERS, …) itself.
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EndpointVar, err)
	}
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, read last, win over serviceName.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", serviceName)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	// Batching: a span ends in a request's goroutine without waiting for the network; the
	// batcher sends them every few seconds, and drops (rather than blocks) when its queue is
	// full, so a slow or absent collector never slows the shop.
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(provider)
	return provider.Shutdown, nil
}
