package payments_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
)

// MustKey reserves key and, if complete is set, completes it.
func MustKey(tb testing.TB, s *models.IdempotencyStore, key string, complete bool) {
	tb.Helper()
	ctx := context.Background()
	r, err := s.Reserve(ctx, models.ReserveRequest{TenantID: "acme", Key: key, Principal: "api_key:test",
		Endpoint: "POST /api/v1/orders", Fingerprint: strings.Repeat("0", 64),
		Params: []byte("{}"), Lease: time.Minute})
	if err != nil || r.Outcome != models.Reserved {
		tb.Fatalf("reserve %s: got %v, %v, want reserved", key, r, err)
	}
	if complete {
		if err := r.Key.Complete(ctx, models.Response{Status: http.StatusCreated, Body: []byte("{}\n")}); err != nil {
			tb.Fatal(err)
		}
	}
}

// TestReaper: a pass deletes old completed keys only; keys in progress, however old, and
// recent completed keys stay. The same pass prunes journal events older than their retention.
func TestReaper(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		ctx := context.Background()
		s := models.NewIdempotencyStore(db)
		j := models.NewJournalStore(db, nil)
		for detail, age := range map[string]time.Duration{"old": 31 * 24 * time.Hour, "recent": 29 * 24 * time.Hour} {
			j.Record(ctx, models.JournalEvent{TenantID: "acme", IdempotencyKey: "journal", Actor: models.ActorShop,
				Kind: models.JournalReservation, Detail: detail, At: time.Now().UTC().Add(-age)})
		}
		MustKey(t, s, "old-completed", true)
		MustKey(t, s, "old-in-progress", false)
		MustKey(t, s, "recent-completed", true)
		old := time.Now().UTC().Add(-72 * time.Hour)
		if err := db.Model(&models.IdempotencyRecord{}).Where("key LIKE ?", "old-%").
			Updates(map[string]any{"created_at": old, "updated_at": old}).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Model(&models.IdempotencyRecord{}).Where("key = ?", "old-completed").
			Update("completed_at", old).Error; err != nil {
			t.Fatal(err)
		}

		reaper := &payments.Reaper{Store: s, Retention: 24 * time.Hour, Journal: j, JournalRetention: 30 * 24 * time.Hour}
		got, err := reaper.RunOnce(ctx)
		if want := (payments.Reaped{Keys: 1, Events: 1}); err != nil || got != want {
			t.Fatalf("got %+v (%v), want %+v", got, err, want)
		}

		for key, want := range map[string]bool{"old-completed": false, "old-in-progress": true, "recent-completed": true} {
			_, err := s.Get(context.Background(), "acme", key)
			if got := err == nil; got != want {
				t.Errorf("%s kept: got %v, want %v", key, got, want)
			}
		}
		evs, err := j.ForKey(ctx, "acme", "journal")
		if err != nil || len(evs) != 1 || evs[0].Detail != "recent" {
			t.Errorf("journal kept: got %+v (%v), want the recent event only", evs, err)
		}
	})
}

// fakeReaper stands in for the key store or the journal: it deletes n rows, or fails with err.
type fakeReaper struct {
	n   int64
	err error
}

func (f fakeReaper) Reap(context.Context, time.Time, time.Duration, int) (int64, error) {
	return f.n, f.err
}

func (f fakeReaper) Prune(context.Context, time.Time, time.Duration, int) (int64, error) {
	return f.n, f.err
}

// TestReaperErrors: keys and journal are reaped independently, and a journal without a
// retention is refused rather than pruned to nothing.
func TestReaperErrors(t *testing.T) {
	ctx := context.Background()
	errDown := errors.New("database down")
	t.Run("ErrKeysStillPrunesJournal", func(t *testing.T) {
		r := &payments.Reaper{Store: fakeReaper{err: errDown}, Retention: time.Hour,
			Journal: fakeReaper{n: 3}, JournalRetention: time.Hour}
		got, err := r.RunOnce(ctx)
		if !errors.Is(err, errDown) || got.Events != 3 {
			t.Errorf("got %+v (%v), want 3 events pruned and the keys' error", got, err)
		}
	})
	t.Run("ErrNoJournalRetention", func(t *testing.T) {
		r := &payments.Reaper{Store: fakeReaper{n: 1}, Retention: time.Hour, Journal: fakeReaper{n: 3}}
		got, err := r.RunOnce(ctx)
		if err == nil || got != (payments.Reaped{Keys: 1}) {
			t.Errorf("got %+v (%v), want 1 key reaped, no event pruned, and an error", got, err)
		}
	})
}
