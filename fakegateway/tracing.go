package fakegateway

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// The gateway's traces, as a real provider's would be: a server span per request that
// continues the caller's W3C trace context, and a client span per webhook delivery that
// continues the trace of the request that made the event — stored with the event
// (gw_events.traceparent), since the delivery happens later, in the sender's goroutine, and
// may be retried for hours. The gateway shares no code with the shop, so these few helpers
// are its own.
//
// The global TracerProvider is asked for at each span: with tracing off it is OpenTelemetry's
// no-op, and a span costs next to nothing.

func tracer() trace.Tracer { return otel.Tracer("checkoutlab/fakegateway") }

// traceRequests is Echo pre-middleware: one server span per request, named by method and
// route once the router has found it ("POST /v1/charges"; the shop names its side of the call
// "gateway POST /v1/charges").
func traceRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		ctx := otel.GetTextMapPropagator().Extract(req.Context(), propagation.HeaderCarrier(req.Header))
		ctx, span := tracer().Start(ctx, req.Method, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		if span.SpanContext().IsValid() {
			c.SetRequest(req.WithContext(ctx))
		}
		err := next(c)
		if err != nil {
			c.Error(err) // write the answer now, so that the span knows its status
		}
		if span.IsRecording() {
			status := c.Response().Status
			if route := c.Path(); route != "" {
				span.SetName(req.Method + " " + route)
				span.SetAttributes(semconv.HTTPRoute(route))
			}
			span.SetAttributes(semconv.HTTPRequestMethodKey.String(req.Method), semconv.HTTPResponseStatusCode(status))
			if status >= http.StatusInternalServerError {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
		}
		return nil
	}
}

// traceparentOf is the W3C traceparent of ctx's span, "" when there is none, for an event to
// keep.
func traceparentOf(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier["traceparent"]
}

// injectTrace writes ctx's trace context into an outgoing request's header.
func injectTrace(ctx context.Context, h http.Header) {
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
}

// sendTraced is send inside a client span, "webhook <event type>", that continues the trace
// the event was made in.
func (g *Gateway) sendTraced(ctx context.Context, ev eventRow) (int, error) {
	if ev.Traceparent != "" {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": ev.Traceparent})
	}
	ctx, span := tracer().Start(ctx, "webhook "+ev.Type, trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	status, err := g.send(ctx, ev)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("checkoutlab.event_id", ev.ID), attribute.String("checkoutlab.charge_id", ev.ChargeID))
		if err == nil {
			span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		}
		if err != nil || status < 200 || status >= 300 {
			span.SetStatus(codes.Error, "not delivered")
		}
	}
	return status, err
}
