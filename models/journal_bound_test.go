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

// TestJournalBoundsRepeats: a client that replays one key thousands of times must not grow the
// order's journal by a row each time. The first JournalRepeatRows replays are rows; the rest
// are counted on the last of them — both when events are written one by one and in batches.
func TestJournalBoundsRepeats(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		for _, batched := range []bool{false, true} {
			t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				j := models.NewJournalStore(db, nil)
				done := make(chan struct{})
				if batched {
					go func() { j.Run(ctx); close(done) }()
					time.Sleep(50 * time.Millisecond) // Run starts queueing first thing

				}
				key, order := fmt.Sprintf("k-%v", batched), fmt.Sprintf("ord-%v", batched)
				j.Record(ctx, models.JournalEvent{TenantID: "acme", IdempotencyKey: key, OrderID: order, Actor: models.ActorShop,
					Kind: models.JournalReservation, Detail: "reserved: a new key (attempt 1)"})
				const replays, conflicts = 500, 30
				for i := 0; i < replays; i++ {
					j.Record(ctx, models.JournalEvent{TenantID: "acme", IdempotencyKey: key, Actor: models.ActorShop,
						Kind: models.JournalReservation, Detail: "replayed: the stored answer 201, nothing ran"})
					if i < conflicts {
						j.Record(ctx, models.JournalEvent{TenantID: "acme", IdempotencyKey: key, Actor: models.ActorShop,
							Kind: models.JournalReservation, Detail: fmt.Sprintf("in_progress: another request holds the key; 409 with Retry-After %ds", i%3+1)})
					}
				}
				if batched {
					cancel()
					<-done
				}
				defer cancel()
				evs, err := j.ForOrder(context.Background(), order)
				if err != nil {
					t.Fatal(err)
				}
				rows, counted := map[string]int{}, map[string]int{}
				for _, ev := range evs {
					outcome := ev.Detail[:len("replayed")]
					if ev.Detail[:len("in_progress")] == "in_progress" {
						outcome = "in_progress"
					}
					rows[outcome]++
					counted[outcome] += 1 + ev.Repeats
					if ev.Repeats > 0 && (ev.LastAt == nil || ev.LastAt.Before(ev.At)) {
						t.Errorf("a row counting %d repeats has last_at %v, want a time after %v", ev.Repeats, ev.LastAt, ev.At)
					}
				}
				if rows["replayed"] != models.JournalRepeatRows || counted["replayed"] != replays {
					t.Errorf("replays: got %d rows counting %d, want %d rows counting %d", rows["replayed"], counted["replayed"], models.JournalRepeatRows, replays)
				}
				if rows["in_progress"] != models.JournalRepeatRows || counted["in_progress"] != conflicts {
					t.Errorf("409s: got %d rows counting %d, want %d rows counting %d", rows["in_progress"], counted["in_progress"], models.JournalRepeatRows, conflicts)
				}
				if rows["reserved"] != 1 {
					t.Errorf("the reservation: got %d rows, want 1", rows["reserved"])
				}
			})
		}
	})
}

// TestJournalForOrderPage: a long journal comes a page at a time, in ForOrder's order, with
// the total.
func TestJournalForOrderPage(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		j := models.NewJournalStore(db, nil)
		t0 := time.Now().UTC().Add(-time.Hour)
		for i := 0; i < 25; i++ {
			j.Record(ctx, models.JournalEvent{TenantID: "acme", OrderID: "ord_1", Actor: models.ActorOutbox,
				Kind: models.JournalReceipt, Detail: fmt.Sprintf("event %02d", i), At: t0.Add(time.Duration(i) * time.Second)})
		}
		all, err := j.ForOrder(ctx, "ord_1")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, offset := range []int{0, 10, 20} {
			page, err := j.ForOrderPage(ctx, "ord_1", offset, 10)
			if err != nil {
				t.Fatal(err)
			}
			if page.Total != 25 || page.Offset != offset {
				t.Errorf("page at %d: got total %d, offset %d; want 25, %d", offset, page.Total, page.Offset, offset)
			}
			for _, ev := range page.Events {
				got = append(got, ev.Detail)
			}
		}
		if len(got) != len(all) {
			t.Fatalf("pages hold %d events, ForOrder %d", len(got), len(all))
		}
		for i := range all {
			if got[i] != all[i].Detail {
				t.Errorf("event %d: got %q, want %q", i, got[i], all[i].Detail)
			}
		}
	})
}
