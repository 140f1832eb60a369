package models_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// mustAge moves an order's last attempt (and its payments' last change) back by age.
func mustAge(tb testing.TB, db *gorm.DB, orderID string, age time.Duration) {
	tb.Helper()
	at := time.Now().UTC().Add(-age)
	if err := db.Model(&models.Order{}).Where("id = ?", orderID).Update("updated_at", at).Error; err != nil {
		tb.Fatal(err)
	}
	if err := db.Model(&models.Payment{}).Where("order_id = ?", orderID).Update("updated_at", at).Error; err != nil {
		tb.Fatal(err)
	}
}

// startPayment creates a pending payment of the order as read (stale or not), as the payment
// operation's first phase does, and returns CreatePaymentTx's error.
func startPayment(db *gorm.DB, o *models.Order) error {
	return db.Transaction(func(tx *gorm.DB) error {
		_, err := models.CreatePaymentTx(tx, models.NewPayment{TenantID: o.TenantID, Order: o, PaymentMethodID: "pm_x", CardLast4: "4242"})
		return err
	})
}

func mustStock(tb testing.TB, db *gorm.DB, tenant, sku string) int {
	tb.Helper()
	p, err := models.NewProductStore(db).BySKU(context.Background(), tenant, sku)
	if err != nil {
		tb.Fatal(err)
	}
	return p.Stock
}

// TestExpireUnpaidOrders: orders nobody paid within the hold expire and give their stock back,
// once; orders with a payment pending or succeeded, or with a recent attempt, stay.
func TestExpireUnpaidOrders(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		ctx := context.Background()
		orders := models.NewOrderStore(db)
		const hold = 30 * time.Minute
		place := func(sku string, qty int) *models.Order {
			t.Helper()
			o, err := orders.Create(ctx, validOrder(models.Item{SKU: sku, Quantity: qty}))
			if err != nil {
				t.Fatal(err)
			}
			return o
		}
		abandoned := place("brass-compass", 3) // an API order, never paid
		declined := place("brass-compass", 2)  // its one payment was declined
		modelstest.MustSettledPayment(t, db, declined, models.PaymentFailed, "card_declined")
		pending := place("camp-mug", 1) // a payment whose outcome is unknown
		if err := startPayment(db, pending); err != nil {
			t.Fatal(err)
		}
		paid := place("camp-mug", 1)
		modelstest.MustSettledPayment(t, db, paid, models.PaymentSucceeded, "")
		recent := place("camp-mug", 1) // placed a minute ago
		retried := place("headlamp", 1)
		modelstest.MustSettledPayment(t, db, retried, models.PaymentFailed, "insufficient_funds")
		for _, o := range []*models.Order{abandoned, declined, pending, paid, retried} {
			mustAge(t, db, o.ID, hold+time.Minute)
		}
		mustAge(t, db, recent.ID, time.Minute)
		// retried's order is old, but its latest payment was declined a minute ago.
		if err := db.Model(&models.Payment{}).Where("order_id = ?", retried.ID).
			Update("updated_at", time.Now().UTC().Add(-time.Minute)).Error; err != nil {
			t.Fatal(err)
		}
		if got := mustStock(t, db, "acme", "brass-compass"); got != 0 {
			t.Fatalf("compass stock before expiry: got %d, want 0", got)
		}

		var journaled []models.ExpiredOrder
		expired, err := orders.ExpireUnpaidOrders(ctx, time.Now().Add(-hold), 100, func(tx *gorm.DB, e []models.ExpiredOrder) error {
			journaled = e
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, e := range expired {
			got[e.ID] = e.Units
		}
		if len(got) != 2 || got[abandoned.ID] != 3 || got[declined.ID] != 2 || len(journaled) != 2 {
			t.Fatalf("expired %v (finish saw %d), want %s with 3 units and %s with 2", expired, len(journaled), abandoned.ID, declined.ID)
		}
		if got := mustStock(t, db, "acme", "brass-compass"); got != 5 {
			t.Errorf("compass stock after expiry: got %d, want 5", got)
		}
		for id, want := range map[string]string{abandoned.ID: models.OrderExpired, declined.ID: models.OrderExpired,
			pending.ID: models.OrderPendingPayment, paid.ID: models.OrderPaid, recent.ID: models.OrderPendingPayment,
			retried.ID: models.OrderPaymentFailed} {
			o, err := orders.Get(ctx, "acme", id)
			if err != nil {
				t.Fatal(err)
			}
			if o.Status != want {
				t.Errorf("order %s: got status %q, want %q", id, o.Status, want)
			}
		}

		again, err := orders.ExpireUnpaidOrders(ctx, time.Now().Add(-hold), 100, nil)
		if err != nil || len(again) != 0 {
			t.Errorf("second pass: got %v, %v; want nothing expired", again, err)
		}
		if got := mustStock(t, db, "acme", "brass-compass"); got != 5 {
			t.Errorf("compass stock after a second pass: got %d, want 5 (given back once)", got)
		}

		t.Run("ErrOrderExpired", func(t *testing.T) {
			cur, err := orders.Get(ctx, "acme", abandoned.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := startPayment(db, cur); !errors.Is(err, models.ErrOrderExpired) {
				t.Errorf("paying an expired order: got %v, want ErrOrderExpired", err)
			}
		})
		t.Run("ErrOrderExpiredReadBeforeExpiry", func(t *testing.T) {
			// The payment read the order while it could still be paid; it expired meanwhile.
			stale := *declined
			stale.Status = models.OrderPaymentFailed
			if err := startPayment(db, &stale); !errors.Is(err, models.ErrOrderExpired) {
				t.Errorf("got %v, want ErrOrderExpired", err)
			}
		})
	})
}

// TestExpiryWaitsForAPaymentInFlight: a payment is being created for an order past its hold,
// its transaction not yet committed, when the expiry runs. The expiry must not expire the
// order under it (on PostgreSQL it would, if the payment did not hold the order's row: the
// expiry's snapshot cannot see the uncommitted payment).
func TestExpiryWaitsForAPaymentInFlight(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		ctx := context.Background()
		orders := models.NewOrderStore(db)
		o, err := orders.Create(ctx, validOrder(models.Item{SKU: "brass-compass", Quantity: 1}))
		if err != nil {
			t.Fatal(err)
		}
		mustAge(t, db, o.ID, time.Hour)

		tx := db.Begin()
		if _, err := models.CreatePaymentTx(tx, models.NewPayment{TenantID: "acme", Order: o, PaymentMethodID: "pm_x", CardLast4: "4242"}); err != nil {
			t.Fatal(err)
		}
		done := make(chan []models.ExpiredOrder, 1)
		go func() {
			e, err := orders.ExpireUnpaidOrders(ctx, time.Now().Add(-30*time.Minute), 100, nil)
			if err != nil {
				t.Error(err)
			}
			done <- e
		}()
		time.Sleep(300 * time.Millisecond) // let the expiry reach the order's row
		if err := tx.Commit().Error; err != nil {
			t.Fatal(err)
		}
		if e := <-done; len(e) != 0 {
			t.Errorf("expired %v under a payment in flight, want nothing", e)
		}
		got, err := orders.Get(ctx, "acme", o.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != models.OrderPendingPayment {
			t.Errorf("status: got %q, want %q", got.Status, models.OrderPendingPayment)
		}
	})
}

// TestNewPaymentWhileAnotherSettles: a new payment of an order is being created while the
// order's live payment settles (its row updated, the order not yet). The new payment must wait
// for the settlement without holding the order's row — the settlement moves the order next —
// and then be refused as order_already_paid; neither may deadlock (PostgreSQL would abort one).
func TestNewPaymentWhileAnotherSettles(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		ctx := context.Background()
		o, err := models.NewOrderStore(db).Create(ctx, validOrder(models.Item{SKU: "camp-mug", Quantity: 1}))
		if err != nil {
			t.Fatal(err)
		}
		if err := startPayment(db, o); err != nil {
			t.Fatal(err)
		}
		var live models.Payment
		if err := db.Where("order_id = ?", o.ID).Take(&live).Error; err != nil {
			t.Fatal(err)
		}

		settle := db.Begin()
		if err := settle.Model(&models.Payment{}).Where("id = ?", live.ID).Update("status", models.PaymentSucceeded).Error; err != nil {
			t.Fatal(err)
		}
		second := make(chan error, 1)
		go func() { second <- startPayment(db, o) }()
		time.Sleep(300 * time.Millisecond) // let the second payment reach the payments index
		if err := settle.Model(&models.Order{}).Where("id = ?", o.ID).Update("status", models.OrderPaid).Error; err != nil {
			settle.Rollback()
			t.Fatalf("the settlement could not move the order: %v", err)
		}
		if err := settle.Commit().Error; err != nil {
			t.Fatal(err)
		}
		if err := <-second; !errors.Is(err, models.ErrOrderAlreadyPaid) {
			t.Errorf("the second payment: got %v, want ErrOrderAlreadyPaid", err)
		}
	})
}
