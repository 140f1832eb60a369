package handlers_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"checkoutlab/handlers"
)

// tracedEcho is a router with the tracing middleware and two routes: one that answers, one
// that fails with 503.
func tracedEcho() *echo.Echo {
	e := echo.New()
	e.Pre(handlers.Tracing())
	e.GET("/things/:id", func(c echo.Context) error {
		// What the handler's context carries is what a gateway call would send on.
		return c.String(http.StatusOK, trace.SpanContextFromContext(c.Request().Context()).TraceID().String())
	})
	e.POST("/down", func(c echo.Context) error { return echo.NewHTTPError(http.StatusServiceUnavailable) })
	return e
}

func TestTracingNamesTheSpanByRouteAndContinuesTheCaller(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	provider, propagator := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		otel.SetTracerProvider(provider)
		otel.SetTextMapPropagator(propagator)
	})
	e := tracedEcho()

	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req := httptest.NewRequest(http.MethodGet, "/things/42", nil)
	req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if rec.Body.String() != callerTrace {
		t.Errorf("the handler's context has trace %q, want the caller's %s", rec.Body.String(), callerTrace)
	}
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/down", nil))

	spans := recorder.Ended()
	if len(spans) != 2 {
		t.Fatalf("got %d spans, want 2", len(spans))
	}
	ok, down := spans[0], spans[1]
	if ok.Name() != "GET /things/:id" || ok.SpanKind() != trace.SpanKindServer {
		t.Errorf("span %q (%s), want GET /things/:id, a server span", ok.Name(), ok.SpanKind())
	}
	if got := ok.Parent().SpanID().String(); got != callerSpan || !ok.Parent().IsRemote() {
		t.Errorf("parent span %s (remote %v), want the caller's %s", got, ok.Parent().IsRemote(), callerSpan)
	}
	if down.Name() != "POST /down" || down.Status().Code != codes.Error {
		t.Errorf("span %q with status %v, want POST /down marked as an error (503)", down.Name(), down.Status().Code)
	}
	if down.Parent().IsValid() {
		t.Errorf("a request without traceparent has parent %s, want a new trace", down.Parent().SpanID())
	}
}

// BenchmarkTracingOff is the middleware's cost with tracing off — OpenTelemetry's no-op
// provider, what `serve` runs without OTEL_EXPORTER_OTLP_ENDPOINT — on top of
// BenchmarkWithoutTracing, the same route without it.
func BenchmarkTracingOff(b *testing.B) {
	provider := otel.GetTracerProvider()
	otel.SetTracerProvider(noop.NewTracerProvider()) // as off, even after a test installed one
	b.Cleanup(func() { otel.SetTracerProvider(provider) })
	e := echo.New()
	e.Pre(handlers.Tracing())
	benchmarkRoute(b, e)
}

func BenchmarkWithoutTracing(b *testing.B) { benchmarkRoute(b, echo.New()) }

func benchmarkRoute(b *testing.B, e *echo.Echo) {
	e.GET("/things/:id", func(c echo.Context) error { return c.String(http.StatusOK, "") })
	req := httptest.NewRequest(http.MethodGet, "/things/42", nil)
	for b.Loop() {
		e.ServeHTTP(httptest.NewRecorder(), req)
	}
}
