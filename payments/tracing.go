package payments

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Spans of the payment operations, the gateway calls and the jobs. They are for the people
// tuning the shop (docs/traces.md); the journal remains the story of an order. Each helper
// asks the global TracerProvider for its tracer at each span, so that whatever provider is
// installed when the work runs gets the span; with tracing off that is OpenTelemetry's no-op
// and a span costs next to nothing.

const tracerName = "checkoutlab/payments"

func tracer() trace.Tracer { return otel.Tracer(tracerName) }

// startPhase opens the span of one phase of an operation, "phase <name>", with the key's
// recovery point as it stands when the phase starts. End it with endPhase. A phase that hands
// its outcome straight to the next one (the charge to the finish) contains that phase's span.
func startPhase(ctx context.Context, name string, key Key) (context.Context, trace.Span) {
	ctx, span := tracer().Start(ctx, "phase "+name)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("checkoutlab.recovery_point", key.RecoveryPoint()),
			attribute.String("checkoutlab.idempotency_key", keyName(key)))
	}
	return ctx, span
}

// endPhase ends a phase's span, marked failed if err is set.
func endPhase(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, "phase failed")
	}
	span.End()
}

// tracedTransport makes one client span per call to the gateway and sends the call's trace
// context with it (traceparent), so the gateway's spans, and the webhook it sends later about
// the charge, join the shop's trace. It wraps whatever transport the client is built with.
type tracedTransport struct{ next http.RoundTripper }

func traceGatewayCalls(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return tracedTransport{next}
}

func (t tracedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, span := tracer().Start(req.Context(), "gateway "+req.Method+" "+gatewayRoute(req.URL.Path),
		trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	if span.SpanContext().IsValid() {
		// A RoundTripper must not change the request it is given: send a copy with the header.
		req = req.Clone(ctx)
		otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	}
	resp, err := t.next.RoundTrip(req)
	if span.IsRecording() {
		span.SetAttributes(semconv.HTTPRequestMethodKey.String(req.Method), semconv.URLPath(req.URL.Path),
			semconv.ServerAddress(req.URL.Host))
		switch {
		case err != nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, "no answer")
		default:
			span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
			if resp.StatusCode >= 500 {
				span.SetStatus(codes.Error, http.StatusText(resp.StatusCode))
			}
		}
	}
	return resp, err
}

// gatewayRoute names a gateway call by its route, not its path: "/v1/charges/:id" rather than
// one name per charge, so that spans of one kind group together.
func gatewayRoute(path string) string {
	switch {
	case strings.HasPrefix(path, "/v1/charges/") && strings.HasSuffix(path, "/refunds"):
		return "/v1/charges/:id/refunds"
	case strings.HasPrefix(path, "/v1/charges/"):
		return "/v1/charges/:id"
	}
	return path
}

// metadataTraceparent is where a job carries the trace context of the transaction that
// enqueued it, in River's job metadata.
const metadataTraceparent = "traceparent"

// jobTracing is River middleware. On insert it writes the inserting context's traceparent into
// the job's metadata; a side effect is enqueued in the transaction that settles a payment
// (a checkout's finish, or the webhook's), so the job joins that trace. On work it makes one
// span per job run, "job <kind>", continuing that trace.
type jobTracing struct{ river.MiddlewareDefaults }

func (*jobTracing) InsertMany(ctx context.Context, many []*rivertype.JobInsertParams,
	doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	if tp := carrier[metadataTraceparent]; tp != "" { // nothing to carry when no trace is on
		for _, params := range many {
			params.Metadata = withMetadata(params.Metadata, metadataTraceparent, tp)
		}
	}
	return doInner(ctx)
}

func (*jobTracing) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	var meta map[string]any
	_ = json.Unmarshal(job.Metadata, &meta) // no metadata, no parent: the job starts its own trace
	if tp, _ := meta[metadataTraceparent].(string); tp != "" {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{metadataTraceparent: tp})
	}
	ctx, span := tracer().Start(ctx, "job "+job.Kind, trace.WithSpanKind(trace.SpanKindConsumer))
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(attribute.String("checkoutlab.job_kind", job.Kind),
			attribute.String("checkoutlab.job_id", strconv.FormatInt(job.ID, 10)),
			attribute.Int("checkoutlab.job_attempt", job.Attempt))
	}
	err := doInner(ctx)
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, "job failed")
	}
	return err
}

// withMetadata sets one key of a job's JSON metadata, keeping what is there.
func withMetadata(raw []byte, key, value string) []byte {
	meta := map[string]any{}
	_ = json.Unmarshal(raw, &meta) // empty or absent metadata: start from {}
	meta[key] = value
	out, err := json.Marshal(meta)
	if err != nil {
		return raw // a map of JSON values always marshals; keep the original if not
	}
	return out
}
