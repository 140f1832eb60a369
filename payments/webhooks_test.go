package payments_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
)

// countingOutbox records which orders got side effects enqueued.
type countingOutbox struct {
	mu     sync.Mutex
	orders map[string]int
}

func (o *countingOutbox) EnqueueSideEffectsTx(_ *gorm.DB, order *models.Order) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.orders == nil {
		o.orders = map[string]int{}
	}
	o.orders[order.ID]++
	return nil
}

func (o *countingOutbox) count(orderID string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.orders[orderID]
}

// MustPendingPayment places an order of one camp mug and records a pending payment for it.
func MustPendingPayment(tb testing.TB, db *gorm.DB) *models.Payment {
	tb.Helper()
	var pay *models.Payment
	err := db.Transaction(func(tx *gorm.DB) error {
		o, err := models.CreateOrderTx(tx, models.NewOrder{TenantID: "acme", Email: "ada@example.com",
			Shipping: models.Address{Name: "Ada", Address: "1 Way", City: "London", PostalCode: "N1", Country: "GB"},
			Items:    []models.Item{{SKU: "camp-mug", Quantity: 1}}})
		if err != nil {
			return err
		}
		pay, err = models.CreatePaymentTx(tx, models.NewPayment{TenantID: "acme", Order: o, PaymentMethodID: "pm_test", CardLast4: "4242"})
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return pay
}

var eventSeq int

func event(p *models.Payment, typ, chargeID string) payments.GatewayEvent {
	eventSeq++
	ev := payments.GatewayEvent{ID: fmt.Sprintf("evt_%d_%s", eventSeq, typ), Type: typ}
	status := map[string]string{"charge.pending": "pending", "charge.succeeded": "succeeded", "charge.failed": "failed", "charge.refunded": "refunded"}[typ]
	ev.Data.Charge = payments.GatewayCharge{ID: chargeID, Status: status, Amount: p.Amount, Currency: p.Currency,
		Metadata: map[string]string{"tenant": p.TenantID, "order_id": p.OrderID, "payment_id": p.ID}}
	if typ == "charge.failed" {
		ev.Data.Charge.FailureCode = "card_declined"
	}
	return ev
}

func mustState(tb testing.TB, db *gorm.DB, p *models.Payment) (payment, order string) {
	tb.Helper()
	got, err := models.NewPaymentStore(db).Get(context.Background(), p.ID)
	if err != nil {
		tb.Fatal(err)
	}
	o, err := models.NewOrderStore(db).Get(context.Background(), "acme", p.OrderID)
	if err != nil {
		tb.Fatal(err)
	}
	return got.Status, o.Status
}

// TestWebhookStatusPairs applies every ordered pair of events to a fresh pending payment: the
// final status is the one the forward-only rules allow, whatever order the events came in.
func TestWebhookStatusPairs(t *testing.T) {
	want := map[string]map[string]string{ // first event → second event → final payment status
		"charge.pending":   {"charge.pending": "pending", "charge.succeeded": "succeeded", "charge.failed": "failed", "charge.refunded": "refunded"},
		"charge.succeeded": {"charge.pending": "succeeded", "charge.succeeded": "succeeded", "charge.failed": "succeeded", "charge.refunded": "refunded"},
		"charge.failed":    {"charge.pending": "failed", "charge.succeeded": "failed", "charge.failed": "failed", "charge.refunded": "failed"},
		"charge.refunded":  {"charge.pending": "refunded", "charge.succeeded": "refunded", "charge.failed": "refunded", "charge.refunded": "refunded"},
	}
	orderFor := map[string]string{"pending": models.OrderPendingPayment, "succeeded": models.OrderPaid,
		"failed": models.OrderPaymentFailed, "refunded": ""}
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		for first, seconds := range want {
			for second, final := range seconds {
				t.Run(first+"_then_"+second, func(t *testing.T) {
					outbox := &countingOutbox{}
					proc := &payments.WebhookProcessor{DB: db, Outbox: outbox}
					p := MustPendingPayment(t, db)
					for _, typ := range []string{first, second} {
						if _, _, err := proc.Process(context.Background(), event(p, typ, "ch_"+p.ID)); err != nil {
							t.Fatal(err)
						}
					}
					gotPayment, gotOrder := mustState(t, db, p)
					if gotPayment != final {
						t.Errorf("payment: got %s, want %s", gotPayment, final)
					}
					if wantOrder := orderFor[final]; wantOrder != "" && gotOrder != wantOrder {
						t.Errorf("order: got %s, want %s", gotOrder, wantOrder)
					}
					// Side effects are enqueued once exactly when the payment went through succeeded.
					wentThroughSuccess := first == "charge.succeeded" || (second == "charge.succeeded" && (first == "charge.pending" || first == "charge.succeeded"))
					if got, wantN := outbox.count(p.OrderID), map[bool]int{true: 1, false: 0}[wentThroughSuccess]; got != wantN {
						t.Errorf("side effects enqueued: got %d, want %d", got, wantN)
					}
				})
			}
		}
	})
}

// TestWebhookDedupe: a redelivered event (same id) is a 2xx no-op; an event about a charge that
// is not ours is recorded and ignored; an event about a second charge of a paid payment (a
// provider that ignored our key) moves nothing.
func TestWebhookDedupe(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		ctx := context.Background()
		outbox := &countingOutbox{}
		proc := &payments.WebhookProcessor{DB: db, Outbox: outbox}
		p := MustPendingPayment(t, db)
		ev := event(p, "charge.succeeded", "ch_first")

		t.Run("OKFirstDelivery", func(t *testing.T) {
			decision, dup, err := proc.Process(ctx, ev)
			if err != nil || dup || decision != models.DecisionApplied {
				t.Fatalf("got %s duplicate=%v %v, want applied", decision, dup, err)
			}
		})
		t.Run("DuplicateIsNoOp", func(t *testing.T) {
			for i := 0; i < 3; i++ {
				_, dup, err := proc.Process(ctx, ev)
				if err != nil || !dup {
					t.Fatalf("redelivery %d: got duplicate=%v %v, want a duplicate", i, dup, err)
				}
			}
			if got := outbox.count(p.OrderID); got != 1 {
				t.Errorf("side effects: got %d, want 1", got)
			}
		})
		t.Run("ConcurrentDuplicates", func(t *testing.T) {
			q := MustPendingPayment(t, db)
			ev := event(q, "charge.succeeded", "ch_concurrent")
			var wg sync.WaitGroup
			for i := 0; i < 10; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, _, err := proc.Process(ctx, ev); err != nil {
						t.Errorf("process: %v", err)
					}
				}()
			}
			wg.Wait()
			if got := outbox.count(q.OrderID); got != 1 {
				t.Errorf("side effects after 10 concurrent deliveries: got %d, want 1", got)
			}
		})
		t.Run("OtherChargeMovesNothing", func(t *testing.T) {
			decision, _, err := proc.Process(ctx, event(p, "charge.refunded", "ch_second"))
			if err != nil || decision != models.DecisionNoChange {
				t.Fatalf("got %s %v, want no_change", decision, err)
			}
			if got, _ := mustState(t, db, p); got != models.PaymentSucceeded {
				t.Errorf("payment: got %s, want succeeded (the refund was of another charge)", got)
			}
		})
		t.Run("UnknownPayment", func(t *testing.T) {
			stranger := payments.GatewayEvent{ID: "evt_stranger", Type: "charge.succeeded"}
			stranger.Data.Charge = payments.GatewayCharge{ID: "ch_stranger", Status: "succeeded", Metadata: map[string]string{"tenant": "acme", "payment_id": "pay_nope"}}
			decision, _, err := proc.Process(ctx, stranger)
			if err != nil || decision != models.DecisionUnknownPayment {
				t.Fatalf("got %s %v, want unknown_payment", decision, err)
			}
		})
		t.Run("OtherTenantsMetadataIgnored", func(t *testing.T) {
			q := MustPendingPayment(t, db)
			ev := event(q, "charge.succeeded", "ch_forged_tenant")
			ev.Data.Charge.Metadata["tenant"] = "globex"
			decision, _, err := proc.Process(ctx, ev)
			if err != nil || decision != models.DecisionUnknownPayment {
				t.Fatalf("got %s %v, want unknown_payment", decision, err)
			}
		})
		t.Run("UnhandledTypeIgnored", func(t *testing.T) {
			decision, dup, err := proc.Process(ctx, payments.GatewayEvent{ID: "evt_x", Type: "charge.disputed"})
			if err != nil || dup || decision != payments.DecisionIgnored {
				t.Fatalf("got %s %v %v, want ignored", decision, dup, err)
			}
		})
	})
}

// TestSettleRace: the response path and the webhook path settle one payment at once; exactly
// one of them moves it, and so exactly one enqueues the side effects.
func TestSettleRace(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		p := MustPendingPayment(t, db)
		var wg sync.WaitGroup
		var mu sync.Mutex
		moved := 0
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := db.Transaction(func(tx *gorm.DB) error {
					tr, err := models.SettlePaymentTx(tx, p.ID, models.PaymentSucceeded, "ch_race", "")
					if err == nil && tr.Moved {
						mu.Lock()
						moved++
						mu.Unlock()
					}
					return err
				})
				if err != nil {
					t.Errorf("settle: %v", err)
				}
			}()
		}
		wg.Wait()
		if moved != 1 {
			t.Errorf("got %d writers that moved the payment, want 1", moved)
		}
	})
}
