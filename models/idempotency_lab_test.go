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

// The failure lab's variants must really have the flaw each protection removes: the lab's
// unprotected runs are only as honest as these.

func TestForgetfulReservations(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		s := models.NewIdempotencyStore(db)
		forgetful := models.ForgetfulReservations{Store: s}
		for range 2 {
			r, err := forgetful.Reserve(context.Background(), reserveRequest("retried"))
			if err != nil || r.Outcome != models.Reserved {
				t.Fatalf("got %v, %v, want every retry reserved anew", r, err)
			}
			MustComplete(t, r.Key, 201, "{}\n")
		}
		if _, err := s.Get(context.Background(), "acme", "retried"); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("the client's key: got %v, want not found (nothing remembered)", err)
		}
	})
}

func TestCheckThenInsertReservations(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		ctx := context.Background()
		s := models.NewIdempotencyStore(db)
		racy := models.CheckThenInsertReservations{Store: s}

		// Two requests check before either completes: both own the key.
		first, err := racy.Reserve(ctx, reserveRequest("raced"))
		if err != nil || first.Outcome != models.Reserved {
			t.Fatalf("first: got %v, %v, want reserved", first, err)
		}
		second, err := racy.Reserve(ctx, reserveRequest("raced"))
		if err != nil || second.Outcome != models.Reserved {
			t.Fatalf("second: got %v, %v, want reserved too (the race window)", second, err)
		}
		if _, err := s.Get(ctx, "acme", "raced"); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("before completion: got %v, want the key absent", err)
		}

		// The first to complete writes the answer under the client's key; the other cannot.
		MustComplete(t, first.Key, 201, `{"first":true}`+"\n")
		if err := second.Key.Complete(ctx, models.Response{Status: 201, Body: []byte("{}\n")}); err == nil || second.Key.Completed() {
			t.Errorf("second completion: got %v, completed %v; want it refused by the (tenant_id, key) constraint", err, second.Key.Completed())
		}
		r, err := racy.Reserve(ctx, reserveRequest("raced"))
		if err != nil || r.Outcome != models.Replay || string(r.Response.Body) != `{"first":true}`+"\n" {
			t.Errorf("retry: got %+v, %v, want the first answer replayed", r, err)
		}

		// Completion inside a business transaction is fenced like the real key's.
		third, _ := racy.Reserve(ctx, reserveRequest("fenced"))
		if err := db.Model(&models.IdempotencyRecord{}).Where("id = ?", third.Key.ID()).
			Update("lock_token", "someone-else").Error; err != nil {
			t.Fatal(err)
		}
		err = db.Transaction(func(tx *gorm.DB) error { return third.Key.CompleteTx(tx, models.Response{Status: 201}) })
		if !errors.Is(err, models.ErrLeaseLost) {
			t.Errorf("completion after a takeover: got %v, want ErrLeaseLost", err)
		}
	})
}

func TestOverwritePaymentStatus(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		o := modelstest.MustOrderAt(t, db, "acme", "camp-mug", time.Now())
		p := modelstest.MustSettledPayment(t, db, o, models.PaymentSucceeded, "")
		var moved *models.PaymentTransition
		err := db.Transaction(func(tx *gorm.DB) error {
			var err error
			moved, err = models.OverwritePaymentStatusTx(tx, p.ID, models.PaymentPending, "", "")
			return err
		})
		if err != nil || !moved.Moved || moved.Payment.Status != models.PaymentPending || moved.Order.Status != models.OrderPendingPayment {
			t.Errorf("got %+v, %v; want a paid order moved back to pending (what monotonic_status prevents)", moved, err)
		}
	})
}
