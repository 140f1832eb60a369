package idempotency_test

import (
	"net/http"
	"testing"
	"time"

	"gorm.io/gorm"

	"checkoutlab/models/modelstest"
)

// TestSlowOwnerKeepsItsKey: an owner that works for several leases, but is alive, keeps its
// key, because the middleware renews the lease every lease/3. A duplicate that arrives after
// the first lease would have run out gets 409 and runs nothing; once the owner is done, the
// duplicate gets the replay. Without the renewals, the duplicate would take the key over and
// the handler would run twice.
func TestSlowOwnerKeepsItsKey(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		s := newShop(t, db)
		const lease = 300 * time.Millisecond
		s.m.Lease = lease
		op, started, release := blockingOp()
		s.setOp(op)
		owner := startOwner(t, s, "k-slow-owner", started)

		time.Sleep(3 * lease) // three leases: without renewals the key is up for takeover
		dup := make(chan answer, 1)
		go func() { dup <- s.post("k-slow-owner", "") }()
		select {
		case a := <-dup:
			mustStatus(t, a, http.StatusConflict, "idempotency_request_in_progress")
		case <-time.After(2 * time.Second):
			close(release) // let both handlers end
			t.Fatalf("the duplicate took the live owner's key over and ran the handler too (%d runs)", s.runs.Load())
		}

		close(release)
		first := <-owner
		mustStatus(t, first, http.StatusCreated, "")
		mustReplayOf(t, s.post("k-slow-owner", ""), first)
		if n := s.runs.Load(); n != 1 {
			t.Fatalf("the handler ran %d times, want 1", n)
		}
	})
}
