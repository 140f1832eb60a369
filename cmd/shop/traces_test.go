package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"checkoutlab/models/modelstest"
	"checkoutlab/telemetry"
)

// TestOneTraceFromCheckoutToJobs: one checkout through a real stack is one trace, from the
// request through its phases, the gateway call (both sides), the webhook the gateway sends
// about the charge (both sides) and the jobs that follow.
func TestOneTraceFromCheckoutToJobs(t *testing.T) {
	recorder := mustRecordSpans(t)
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			// The completer is kept out of it (WebhookSettles): it would settle a payment in
			// a trace of its own.
			st := MustStartShop(t, dialect, withEnv(fastEnv, map[string]string{"COMPLETER_INTERVAL": "1h"}))
			t.Run("AnswerSettles", func(t *testing.T) {
				key := "trace-" + dialect
				if a := post(st.Shop, "/api/v1/checkout", key, checkoutBody("4242424242424242")); a.Status != http.StatusCreated {
					t.Fatalf("checkout: got %d %s, want 201", a.Status, a.Raw)
				}
				spans := mustTraceOf(t, recorder, key, "POST /api/v1/checkout", "idempotency reserve", "phase create_payment",
					"phase charge", "phase finish", "gateway POST /v1/payment_methods", "POST /v1/payment_methods",
					"gateway POST /v1/charges", "POST /v1/charges", "webhook charge.pending", "webhook charge.succeeded",
					"POST /webhooks/gateway", "job send_receipt", "job request_shipment")
				for _, s := range spans {
					switch s.Name() {
					case "POST /v1/charges": // the trace crosses to the gateway…
						if got := ancestors(spans, s); len(got) == 0 || got[0] != "gateway POST /v1/charges" {
							t.Errorf("the gateway's charge span descends from %v, want the shop's call gateway POST /v1/charges", got)
						}
					case "POST /webhooks/gateway": // …and comes back with its webhook
						if got := ancestors(spans, s); len(got) == 0 || !strings.HasPrefix(got[0], "webhook charge.") {
							t.Errorf("the shop's webhook span descends from %v, want the gateway's delivery webhook charge.…", got)
						}
					case "idempotency reserve", "phase create_payment", "phase charge", "phase finish":
						if got := attr(s, "checkoutlab.idempotency_key"); got != key {
							t.Errorf("%s: idempotency key %q, want %q", s.Name(), got, key)
						}
					}
				}
			})
			// The answer is lost (the card's commit_then_error): the webhook alone settles the
			// payment, so it is the webhook that enqueues the jobs, and they continue its trace.
			t.Run("WebhookSettles", func(t *testing.T) {
				key := "trace-webhook-" + dialect
				if a := post(st.Shop, "/api/v1/checkout", key, checkoutBody("4000000000000119")); a.Status != http.StatusBadGateway {
					t.Fatalf("checkout: got %d %s, want 502 payment_outcome_unknown", a.Status, a.Raw)
				}
				spans := mustTraceOf(t, recorder, key, "POST /api/v1/checkout", "gateway POST /v1/charges", "POST /v1/charges",
					"webhook charge.succeeded", "POST /webhooks/gateway", "job send_receipt", "job request_shipment")
				for _, s := range spans {
					if strings.HasPrefix(s.Name(), "job ") && !slices.Contains(ancestors(spans, s), "POST /webhooks/gateway") {
						t.Errorf("%s descends from %v, want the shop's webhook request among them", s.Name(), ancestors(spans, s))
					}
				}
			})
		})
	}
}

// mustTraceOf waits (bounded) until the trace of the checkout under key holds spans named
// want — the webhook and the jobs come after the answer — and returns the trace's spans.
func mustTraceOf(t *testing.T, recorder *tracetest.SpanRecorder, key string, want ...string) []sdktrace.ReadOnlySpan {
	t.Helper()
	request := mustFindSpan(t, recorder.Ended(), func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() == "POST /api/v1/checkout" && s.SpanKind() == trace.SpanKindServer &&
			attr(s, "checkoutlab.idempotency_key") == key
	})
	traceID := request.SpanContext().TraceID()
	var spans []sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		spans = inTrace(recorder.Ended(), traceID)
		if hasAll(spans, want) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s has spans %v, want at least %v", traceID, names(spans), want)
		}
	}
}

// ancestors names s's parent, its parent's parent, and so on, within spans.
func ancestors(spans []sdktrace.ReadOnlySpan, s sdktrace.ReadOnlySpan) []string {
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, span := range spans {
		byID[span.SpanContext().SpanID()] = span
	}
	var out []string
	for p, ok := byID[s.Parent().SpanID()]; ok; p, ok = byID[p.Parent().SpanID()] {
		out = append(out, p.Name())
	}
	return out
}

// mustRecordSpans installs, for the test, an SDK TracerProvider that keeps every ended span
// in memory, and the W3C propagator (as `serve` does with tracing off): the stacks the test
// starts pick them up, as they pick up `serve`'s or `shop bench`'s.
func mustRecordSpans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	provider, propagator := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Setenv(telemetry.EndpointVar, "")
	if _, err := telemetry.Setup(context.Background(), "shop"); err != nil {
		t.Fatal(err)
	}
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		otel.SetTracerProvider(provider)
		otel.SetTextMapPropagator(propagator)
	})
	return recorder
}

func mustFindSpan(t *testing.T, spans []sdktrace.ReadOnlySpan, match func(sdktrace.ReadOnlySpan) bool) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range spans {
		if match(s) {
			return s
		}
	}
	t.Fatalf("no such span among %v", names(spans))
	return nil
}

func inTrace(spans []sdktrace.ReadOnlySpan, id trace.TraceID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanContext().TraceID() == id {
			out = append(out, s)
		}
	}
	return out
}

func hasAll(spans []sdktrace.ReadOnlySpan, want []string) bool {
	got := names(spans)
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, 0, len(spans))
	for _, s := range spans {
		out = append(out, s.Name())
	}
	slices.Sort(out)
	return out
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if kv.Key == attribute.Key(key) {
			return kv.Value.Emit()
		}
	}
	return ""
}
