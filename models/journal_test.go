package models_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

func TestJournal(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		j := models.NewJournalStore(db, nil)
		// The first reservation is written before the order exists; the phase names both.
		j.Record(ctx, models.JournalEvent{TenantID: "acme", IdempotencyKey: "k1", Actor: models.ActorShop, Kind: models.JournalReservation, Detail: "reserved"})
		err := db.Transaction(func(tx *gorm.DB) error {
			return j.RecordTx(tx, models.JournalEvent{TenantID: "acme", IdempotencyKey: "k1", OrderID: "ord_1", Actor: models.ActorDatabase, Kind: models.JournalPhase, Detail: "payment_created"})
		})
		if err != nil {
			t.Fatal(err)
		}
		j.Record(ctx, models.JournalEvent{TenantID: "acme", OrderID: "ord_1", Actor: models.ActorOutbox, Kind: models.JournalReceipt, Detail: "delivered"})
		j.Record(ctx, models.JournalEvent{TenantID: "acme", IdempotencyKey: "k2", OrderID: "ord_2", Actor: models.ActorShop, Kind: models.JournalReservation, Detail: "reserved"})
		j.Record(ctx, models.JournalEvent{TenantID: "other", IdempotencyKey: "k1", Actor: models.ActorShop, Kind: models.JournalReservation, Detail: "reserved"})
		// A write that breaks a constraint is logged, not returned.
		j.Record(ctx, models.JournalEvent{TenantID: "acme", Actor: "nobody", Kind: "x"})

		t.Run("ForOrder", func(t *testing.T) {
			evs, err := j.ForOrder(ctx, "ord_1")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range evs {
				got = append(got, e.Kind+" "+e.Detail)
			}
			want := []string{"reservation reserved", "phase payment_created", "receipt delivered"}
			if len(got) != len(want) {
				t.Fatalf("got %q, want %q", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("event %d: got %q, want %q", i, got[i], want[i])
				}
			}
			if evs[0].OrderID != "" || evs[1].OrderID != "ord_1" {
				t.Errorf("order ids: got %q and %q, want empty and ord_1", evs[0].OrderID, evs[1].OrderID)
			}
			if d := time.Since(evs[0].At); d < 0 || d > time.Minute {
				t.Errorf("at: got %v, want about now", evs[0].At)
			}
		})
		t.Run("ForKey", func(t *testing.T) {
			evs, err := j.ForKey(ctx, "acme", "k1")
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 2 || evs[0].ID >= evs[1].ID {
				t.Errorf("got %+v, want the two events of acme's k1 in order", evs)
			}
		})
		t.Run("SubMillisecond", func(t *testing.T) {
			at := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
			j.Record(ctx, models.JournalEvent{TenantID: "acme", OrderID: "ord_3", Actor: models.ActorShop, Kind: "x", At: at})
			evs, err := j.ForOrder(ctx, "ord_3")
			if err != nil || len(evs) != 1 {
				t.Fatalf("got %v %v, want one event", evs, err)
			}
			if !evs[0].At.Equal(at) {
				t.Errorf("at: got %v, want %v", evs[0].At, at)
			}
		})
	})
}

// TestJournalBatchedWriter: with Run going, Record queues events and Run writes them in
// batches; stopping Run writes what is left. Events keep the order they were recorded in.
func TestJournalBatchedWriter(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		j := models.NewJournalStore(db, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); j.Run(ctx) }()
		time.Sleep(20 * time.Millisecond) // let Run start
		for i := 0; i < 450; i++ {        // more than two batches
			j.Record(context.Background(), models.JournalEvent{TenantID: "acme", IdempotencyKey: "batch",
				Actor: models.ActorShop, Kind: "x", Detail: fmt.Sprint(i)})
		}
		cancel()
		<-done
		evs, err := j.ForKey(context.Background(), "acme", "batch")
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 450 {
			t.Fatalf("got %d events, want 450", len(evs))
		}
		for i, ev := range evs {
			if ev.Detail != fmt.Sprint(i) {
				t.Fatalf("event %d: got detail %q, want %d (recording order)", i, ev.Detail, i)
			}
		}
	})
}

// TestJournalPrune: events recorded before the cutoff go, in batches; the event exactly at the
// cutoff and the recent ones stay; a second pass finds nothing.
func TestJournalPrune(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		j := models.NewJournalStore(db, nil)
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		retention := 30 * 24 * time.Hour
		cutoff := now.Add(-retention)
		ages := map[string]time.Time{
			"old-1": cutoff.Add(-90 * 24 * time.Hour), "old-2": cutoff.Add(-time.Hour),
			"old-3": cutoff.Add(-time.Minute), "old-4": cutoff.Add(-time.Second),
			"old-5":     cutoff.Add(-time.Microsecond),
			"at-cutoff": cutoff, "recent": cutoff.Add(time.Microsecond), "today": now.Add(-time.Hour),
		}
		for detail, at := range ages {
			j.Record(ctx, models.JournalEvent{TenantID: "acme", IdempotencyKey: "prune", Actor: models.ActorShop,
				Kind: models.JournalReservation, Detail: detail, At: at})
		}

		n, err := j.Prune(ctx, now, retention, 2) // five old events in batches of two: three rounds
		if err != nil {
			t.Fatal(err)
		}
		if n != 5 {
			t.Errorf("pruned: got %d, want 5", n)
		}
		evs, err := j.ForKey(ctx, "acme", "prune")
		if err != nil {
			t.Fatal(err)
		}
		var kept []string
		for _, ev := range evs {
			kept = append(kept, ev.Detail)
		}
		if got, want := fmt.Sprint(kept), "[at-cutoff recent today]"; got != want {
			t.Errorf("kept: got %s, want %s", got, want)
		}

		if n, err := j.Prune(ctx, now, retention, 2); err != nil || n != 0 {
			t.Errorf("second pass: got %d (%v), want 0", n, err)
		}
	})
}
