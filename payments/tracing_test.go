package payments_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"checkoutlab/payments"
)

// recordingGateway is a gateway stand-in that keeps the traceparent of each request it gets.
func recordingGateway(t *testing.T) (url string, traceparents chan string) {
	traceparents = make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceparents <- r.Header.Get("traceparent")
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/payment_methods":
			_, _ = w.Write([]byte(`{"id":"pm_1","last4":"4242","brand":"visa"}`))
		default:
			_, _ = w.Write([]byte(`{"id":"ch_1","status":"succeeded","amount":100,"currency":"USD"}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, traceparents
}

// With tracing on, every gateway call is a client span named by the gateway's route, and the
// gateway receives that span's traceparent.
func TestGatewayCallsCarryTheirSpan(t *testing.T) {
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
	url, traceparents := recordingGateway(t)
	client := payments.NewGatewayClient(url, 5*time.Second)

	ctx, parent := tp.Tracer("test").Start(context.Background(), "POST /api/v1/checkout")
	if _, err := client.CreatePaymentMethod(ctx, "4242424242424242"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.GetCharge(ctx, "ch_1"); err != nil {
		t.Fatal(err)
	}
	parent.End()

	spans := recorder.Ended()
	if len(spans) != 3 {
		t.Fatalf("got %d spans, want 3 (two calls and their parent)", len(spans))
	}
	for i, want := range []string{"gateway POST /v1/payment_methods", "gateway GET /v1/charges/:id"} {
		s := spans[i]
		if s.Name() != want || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("span %d: got %q (%s), want %q, a client span", i, s.Name(), s.SpanKind(), want)
		}
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("%s: parent %s, want the request's span %s", want, s.Parent().SpanID(), parent.SpanContext().SpanID())
		}
		got := <-traceparents
		wantHeader := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"
		if got != wantHeader {
			t.Errorf("%s: the gateway got traceparent %q, want the call's own %q", want, got, wantHeader)
		}
	}
}

// With tracing off and no trace coming in, the call sends no traceparent at all.
func TestGatewayCallsWithoutTraceSendNone(t *testing.T) {
	provider := otel.GetTracerProvider()
	otel.SetTracerProvider(noop.NewTracerProvider())
	t.Cleanup(func() { otel.SetTracerProvider(provider) })
	url, traceparents := recordingGateway(t)
	if _, err := payments.NewGatewayClient(url, 5*time.Second).CreatePaymentMethod(context.Background(), "4242424242424242"); err != nil {
		t.Fatal(err)
	}
	if got := <-traceparents; got != "" {
		t.Errorf("traceparent %q sent with tracing off, want none", got)
	}
}
