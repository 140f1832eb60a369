package handlers_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"checkoutlab/handlers"
	"checkoutlab/handlers/idempotency"
	"checkoutlab/models"
	"checkoutlab/payments"
)

// TestPaymentEndpoints: the completer finishes abandoned keys by the endpoint they were made
// for, so PaymentEndpoints must name exactly the routes that run a payment operation, with
// the operation each runs.
func TestPaymentEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := handlers.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	idem := MustIdempotency(models.NewIdempotencyStore(nil), time.Minute, idempotency.NewMetrics(reg), nil)
	cards := handlers.NewCardFingerprint([]byte("test shop secret, 32 bytes long!"))
	(&handlers.Storefront{Idempotency: idem, Cards: cards}).Routes(e)
	(&handlers.PaymentsAPI{Ops: &payments.Service{}, Idempotency: idem, Cards: cards}).Routes(e.Group("/api/v1"))

	want := map[string]payments.Operation{
		"api.checkout": payments.OperationCheckout, "shop.checkout.place": payments.OperationCheckout,
		"api.payments": payments.OperationPayment, "shop.order.pay": payments.OperationPayment,
	}
	seen := 0
	for _, r := range e.Routes() {
		op, runs := want[r.Name]
		if !runs {
			continue
		}
		seen++
		if got := handlers.PaymentEndpoints[r.Method+" "+r.Path]; got != op {
			t.Errorf("route %s (%s %s): got operation %q, want %q", r.Name, r.Method, r.Path, got, op)
		}
	}
	if seen != len(want) || len(handlers.PaymentEndpoints) != len(want) {
		t.Errorf("got %d payment routes mounted and %d endpoints mapped, want %d of each", seen, len(handlers.PaymentEndpoints), len(want))
	}
}
