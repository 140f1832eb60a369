package payments_test

import (
	"context"
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
		if err := r.Key.Complete(ctx, http.StatusCreated, nil, []byte("{}\n")); err != nil {
			tb.Fatal(err)
		}
	}
}

// TestReaper: a pass deletes old completed keys only; keys in progress, however old, and
// recent completed keys stay.
func TestReaper(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		s := models.NewIdempotencyStore(db)
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

		n, err := (&payments.Reaper{Store: s, Retention: 24 * time.Hour}).RunOnce(context.Background())
		if err != nil || n != 1 {
			t.Fatalf("reaped %d keys (%v), want 1", n, err)
		}

		for key, want := range map[string]bool{"old-completed": false, "old-in-progress": true, "recent-completed": true} {
			_, err := s.Get(context.Background(), "acme", key)
			if got := err == nil; got != want {
				t.Errorf("%s kept: got %v, want %v", key, got, want)
			}
		}
	})
}
