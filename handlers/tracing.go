package handlers

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

	"checkoutlab/handlers/idempotency"
	"checkoutlab/models"
)

// tracerName is the instrumentation scope of the shop's HTTP spans.
const tracerName = "checkoutlab/handlers"

// tracer is asked for at each span, not kept: whichever TracerProvider is global when the
// request comes (telemetry.Setup's, a test's) gets the span. With tracing off it is
// OpenTelemetry's no-op, whose spans record nothing.
func tracer() trace.Tracer { return otel.Tracer(tracerName) }

// Tracing makes one server span per request, named by method and route ("POST
// /api/v1/checkout"), continuing the trace of an incoming W3C traceparent: the browser's, a
// client's, or the gateway's on a webhook. Mount it with e.Pre, so that the span covers the
// whole request, the shop's other middleware included; the route is known only once the
// router has run, so the span is named at the end.
//
// Tracing off, the span is the no-op's and no attribute is computed; a traceparent that came
// in still reaches the gateway call and the jobs, so a trace started upstream stays whole.
func Tracing() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
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
				endServerSpan(c, span)
			}
			return nil
		}
	}
}

// endServerSpan names the span by its route and records what the shop answered. The
// idempotency key and the request id lead from a trace to the order's journal and the log.
func endServerSpan(c echo.Context, span trace.Span) {
	req, status := c.Request(), c.Response().Status
	if route := c.Path(); route != "" {
		span.SetName(req.Method + " " + route)
		span.SetAttributes(semconv.HTTPRoute(route))
	}
	span.SetAttributes(semconv.HTTPRequestMethodKey.String(req.Method), semconv.URLPath(req.URL.Path),
		semconv.HTTPResponseStatusCode(status), attribute.String("checkoutlab.request_id", RequestID(c)))
	if key := req.Header.Get(idempotency.HeaderKey); key != "" {
		span.SetAttributes(attribute.String("checkoutlab.idempotency_key", key))
	}
	if status >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
}

// TraceReservations wraps an idempotency store so that each reservation is a span,
// "idempotency reserve", with what it found: a key reserved (new or taken over, at which
// recovery point), a replay, a key in progress, a mismatch.
func TraceReservations(store idempotency.Store) idempotency.Store { return tracedReservations{store} }

type tracedReservations struct{ idempotency.Store }

func (s tracedReservations) Reserve(ctx context.Context, req models.ReserveRequest) (*models.Reservation, error) {
	ctx, span := tracer().Start(ctx, "idempotency reserve")
	defer span.End()
	res, err := s.Store.Reserve(ctx, req)
	if !span.IsRecording() {
		return res, err
	}
	span.SetAttributes(attribute.String("checkoutlab.endpoint", req.Endpoint), attribute.String("checkoutlab.idempotency_key", req.Key))
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, "reservation failed")
	case res.Key != nil:
		span.SetAttributes(attribute.String("checkoutlab.outcome", res.Outcome.String()),
			attribute.String("checkoutlab.recovery_point", res.Key.RecoveryPoint()),
			attribute.Int("checkoutlab.attempt", res.Key.Attempts()))
	default:
		span.SetAttributes(attribute.String("checkoutlab.outcome", res.Outcome.String()))
	}
	return res, err
}
