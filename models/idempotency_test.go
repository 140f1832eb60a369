package models_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// fingerprint returns a 64-character stand-in for a SHA-256 hex digest.
func fingerprint(c byte) string { return strings.Repeat(string(c), 64) }

func reserveRequest(key string) models.ReserveRequest {
	return models.ReserveRequest{TenantID: "acme", Key: key, Principal: "api_key:test",
		Endpoint: "POST /api/v1/orders", Fingerprint: fingerprint('a'), Params: []byte(`{"x":1}`),
		Lease: 30 * time.Second}
}

// MustReserve reserves req and fails the test unless the outcome is want.
func MustReserve(tb testing.TB, s *models.IdempotencyStore, req models.ReserveRequest, want models.Outcome) *models.Reservation {
	tb.Helper()
	r, err := s.Reserve(context.Background(), req)
	if err != nil {
		tb.Fatalf("reserve %q: %v", req.Key, err)
	}
	if r.Outcome != want {
		tb.Fatalf("reserve %q: got %v, want %v", req.Key, r.Outcome, want)
	}
	return r
}

// MustComplete completes k outside any business transaction.
func MustComplete(tb testing.TB, k models.OwnedKey, status int, body string) {
	tb.Helper()
	h := http.Header{"Content-Type": {"application/json"}, "Location": {"/x/1"}, "Set-Cookie": {"secret=1"}}
	if err := k.Complete(context.Background(), models.Response{Status: status, Header: h, Body: []byte(body)}); err != nil {
		tb.Fatalf("complete: %v", err)
	}
}

func TestIdempotencyReserve(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		ctx := context.Background()
		s := models.NewIdempotencyStore(db)

		t.Run("ReservedThenInProgress", func(t *testing.T) {
			r := MustReserve(t, s, reserveRequest("k1"), models.Reserved)
			if got, want := r.Key.RecoveryPoint(), models.RecoveryStarted; got != want {
				t.Errorf("recovery point: got %q, want %q", got, want)
			}
			again := MustReserve(t, s, reserveRequest("k1"), models.InProgress)
			if again.RetryAfter <= 0 || again.RetryAfter > 30*time.Second {
				t.Errorf("retry after: got %v, want within (0, 30s]", again.RetryAfter)
			}
		})
		t.Run("Mismatch", func(t *testing.T) {
			MustReserve(t, s, reserveRequest("k2"), models.Reserved)
			for name, change := range map[string]func(*models.ReserveRequest){
				"Principal":   func(r *models.ReserveRequest) { r.Principal = "session:abc" },
				"Endpoint":    func(r *models.ReserveRequest) { r.Endpoint = "POST /api/v1/payments" },
				"Fingerprint": func(r *models.ReserveRequest) { r.Fingerprint = fingerprint('b') },
			} {
				req := reserveRequest("k2")
				change(&req)
				if r, _ := s.Reserve(ctx, req); r == nil || r.Outcome != models.Mismatch {
					t.Errorf("%s: got %v, want mismatch", name, r)
				}
			}
		})
		t.Run("OtherTenantIsSeparate", func(t *testing.T) {
			MustReserve(t, s, reserveRequest("k3"), models.Reserved)
			req := reserveRequest("k3")
			req.TenantID = "globex"
			MustReserve(t, s, req, models.Reserved)
		})
		t.Run("ReplayAfterComplete", func(t *testing.T) {
			r := MustReserve(t, s, reserveRequest("k4"), models.Reserved)
			MustComplete(t, r.Key, 201, `{"id":"ord_1"}`+"\n")
			got := MustReserve(t, s, reserveRequest("k4"), models.Replay).Response
			if got.Status != 201 || string(got.Body) != `{"id":"ord_1"}`+"\n" {
				t.Errorf("got %d %q, want 201 and the stored body", got.Status, got.Body)
			}
			if got.Header.Get("Location") != "/x/1" || got.Header.Get("Content-Type") != "application/json" {
				t.Errorf("headers: got %v, want Content-Type and Location", got.Header)
			}
			if got.Header.Get("Set-Cookie") != "" {
				t.Errorf("Set-Cookie was stored: got %q, want nothing", got.Header.Get("Set-Cookie"))
			}
		})
		t.Run("ReleasedKeyIsTakenOver", func(t *testing.T) {
			first := MustReserve(t, s, reserveRequest("k5"), models.Reserved).Key
			if err := db.Transaction(func(tx *gorm.DB) error { return first.AdvanceTx(tx, "order_created") }); err != nil {
				t.Fatal(err)
			}
			if err := first.Release(ctx); err != nil {
				t.Fatal(err)
			}
			second := MustReserve(t, s, reserveRequest("k5"), models.Reserved).Key
			if got, want := second.RecoveryPoint(), "order_created"; got != want {
				t.Errorf("recovery point: got %q, want %q", got, want)
			}
			if got, want := second.Attempts(), 2; got != want {
				t.Errorf("attempts: got %d, want %d", got, want)
			}
		})
		t.Run("DeletedKeyIsAbsent", func(t *testing.T) {
			k := MustReserve(t, s, reserveRequest("k6"), models.Reserved).Key
			deleted, err := k.Delete(ctx)
			if err != nil || !deleted {
				t.Fatalf("delete: got %v, %v, want true, nil", deleted, err)
			}
			req := reserveRequest("k6")
			req.Fingerprint = fingerprint('c') // a corrected request may differ
			MustReserve(t, s, req, models.Reserved)
		})
		t.Run("DeleteAfterProgressReleases", func(t *testing.T) {
			k := MustReserve(t, s, reserveRequest("k7"), models.Reserved).Key
			if err := db.Transaction(func(tx *gorm.DB) error { return k.AdvanceTx(tx, "payment_created") }); err != nil {
				t.Fatal(err)
			}
			deleted, err := k.Delete(ctx)
			if err != nil || deleted {
				t.Fatalf("delete: got %v, %v, want false, nil", deleted, err)
			}
			rec, err := s.Get(ctx, "acme", "k7")
			if err != nil || rec.LockToken != nil || rec.RecoveryPoint != "payment_created" {
				t.Errorf("got %+v, %v, want a released key at payment_created", rec, err)
			}
		})
	})
}

// TestIdempotencyFencing: an owner whose lease expired and was taken over can neither renew,
// advance nor complete, so it cannot overwrite the new owner's answer.
func TestIdempotencyFencing(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		ctx := context.Background()
		s := models.NewIdempotencyStore(db)
		req := reserveRequest("fenced")
		req.Lease = 50 * time.Millisecond

		stale := MustReserve(t, s, req, models.Reserved).Key
		time.Sleep(80 * time.Millisecond) // the owner stalls for longer than its lease
		winner := MustReserve(t, s, req, models.Reserved).Key
		MustComplete(t, winner, 201, "winner\n")

		if err := stale.Renew(ctx); !errors.Is(err, models.ErrLeaseLost) {
			t.Errorf("renew: got %v, want ErrLeaseLost", err)
		}
		err := db.Transaction(func(tx *gorm.DB) error { return stale.AdvanceTx(tx, "order_created") })
		if !errors.Is(err, models.ErrLeaseLost) {
			t.Errorf("advance: got %v, want ErrLeaseLost", err)
		}
		if err := stale.Complete(ctx, models.Response{Status: 500, Body: []byte("stale\n")}); !errors.Is(err, models.ErrLeaseLost) {
			t.Errorf("complete: got %v, want ErrLeaseLost", err)
		}
		if err := stale.Release(ctx); !errors.Is(err, models.ErrLeaseLost) {
			t.Errorf("release: got %v, want ErrLeaseLost", err)
		}
		got := MustReserve(t, s, req, models.Replay).Response
		if string(got.Body) != "winner\n" {
			t.Errorf("stored body: got %q, want %q", got.Body, "winner\n")
		}
	})
}

// TestIdempotencyReserveRace: twenty goroutines reserve one key at once; exactly one owns it.
func TestIdempotencyReserveRace(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		s := models.NewIdempotencyStore(db)
		var wg sync.WaitGroup
		var mu sync.Mutex
		counts := map[models.Outcome]int{}
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := s.Reserve(context.Background(), reserveRequest("race"))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("reserve: %v", err)
					return
				}
				counts[r.Outcome]++
			}()
		}
		wg.Wait()
		if counts[models.Reserved] != 1 || counts[models.InProgress] != 19 {
			t.Errorf("got %v, want 1 reserved and 19 in progress", counts)
		}
	})
}

// TestIdempotencyTakeoverRace: ten retries find one abandoned key at once; exactly one takes
// it over, the others see its new lease.
func TestIdempotencyTakeoverRace(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		s := models.NewIdempotencyStore(db)
		req := reserveRequest("abandoned")
		MustReserve(t, s, req, models.Reserved)
		// The owner "crashed" a minute ago: it has not renewed its 30 s lease since.
		past := time.Now().UTC().Add(-time.Minute)
		if err := db.Model(&models.IdempotencyRecord{}).Where("key = ?", "abandoned").Update("locked_at", past).Error; err != nil {
			t.Fatal(err)
		}

		var wg sync.WaitGroup
		var mu sync.Mutex
		counts := map[models.Outcome]int{}
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := s.Reserve(context.Background(), req)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("reserve: %v", err)
					return
				}
				counts[r.Outcome]++
				if r.Outcome == models.Reserved && r.Key.Attempts() != 2 {
					t.Errorf("attempts: got %d, want 2", r.Key.Attempts())
				}
			}()
		}
		wg.Wait()
		if counts[models.Reserved] != 1 || counts[models.InProgress] != 9 {
			t.Errorf("got %v, want 1 reserved and 9 in progress", counts)
		}
	})
}

func TestIdempotencyReap(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		ctx := context.Background()
		s := models.NewIdempotencyStore(db)

		for _, key := range []string{"old-1", "old-2", "old-3", "fresh"} {
			MustComplete(t, MustReserve(t, s, reserveRequest(key), models.Reserved).Key, 201, "{}\n")
		}
		MustReserve(t, s, reserveRequest("unfinished"), models.Reserved)
		released := MustReserve(t, s, reserveRequest("released"), models.Reserved).Key
		if err := released.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// Age everything but "fresh" by two days, as if the keys were made then.
		old := time.Now().UTC().Add(-48 * time.Hour)
		aged := db.Model(&models.IdempotencyRecord{}).Where("key <> ?", "fresh")
		if err := aged.Updates(map[string]any{"updated_at": old}).Error; err != nil {
			t.Fatal(err)
		}
		aged = db.Model(&models.IdempotencyRecord{}).Where("key <> ? AND state = ?", "fresh", models.KeyCompleted)
		if err := aged.Updates(map[string]any{"completed_at": old}).Error; err != nil {
			t.Fatal(err)
		}

		n, err := s.Reap(ctx, time.Now(), 24*time.Hour, 2) // batches of two: three rounds
		if err != nil {
			t.Fatal(err)
		}
		if n != 3 {
			t.Errorf("reaped: got %d, want 3", n)
		}
		for key, want := range map[string]bool{"old-1": false, "fresh": true, "unfinished": true, "released": true} {
			_, err := s.Get(ctx, "acme", key)
			if got := err == nil; got != want {
				t.Errorf("%s exists: got %v, want %v (err %v)", key, got, want, err)
			}
		}

		stale, err := s.ListStale(ctx, "", time.Now(), time.Hour, 10)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, r := range stale {
			keys = append(keys, r.Key)
		}
		if got, want := strings.Join(keys, ","), "unfinished,released"; got != want && got != "released,unfinished" {
			t.Errorf("stale: got %s, want %s", got, want)
		}
	})
}
