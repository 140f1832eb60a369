package models_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// heard collects what a KeyListener announced.
type heard struct {
	mu   sync.Mutex
	keys []string
	c    chan string
}

func (h *heard) wake(tenant, key string) {
	h.mu.Lock()
	h.keys = append(h.keys, tenant+"/"+key)
	h.mu.Unlock()
	h.c <- tenant + "/" + key
}

// TestKeyListener checks that the owner's completion and release announce an awaited key to a
// listener on another connection when, and only when, their transaction commits, and that a
// key nobody awaits is not announced.
func TestKeyListener(t *testing.T) {
	db := modelstest.MustOpen(t, models.Postgres)
	modelstest.MustSeed(t, db)
	s := models.NewIdempotencyStore(db)
	h := &heard{c: make(chan string, 16)}
	listening := make(chan struct{}, 1)
	l := models.NewKeyListener(db, h.wake, func() { listening <- struct{}{} }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-listening

	mustHear := func(t *testing.T, want string) {
		t.Helper()
		select {
		case got := <-h.c:
			if got != want {
				t.Fatalf("heard %s, want %s", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("heard nothing, want %s", want)
		}
	}
	answer := models.Response{Status: http.StatusCreated, Header: http.Header{}, Body: []byte(`{}`)}
	awaited := func(t *testing.T, key string) models.OwnedKey {
		t.Helper()
		k := MustReserve(t, s, reserveRequest(key), models.Reserved).Key
		if err := s.AwaitKey(context.Background(), "acme", key); err != nil {
			t.Fatal(err)
		}
		return k
	}
	mustHearNothing := func(t *testing.T) {
		t.Helper()
		select {
		case got := <-h.c:
			t.Fatalf("heard %s, want nothing", got)
		case <-time.After(100 * time.Millisecond):
		}
	}

	t.Run("CompleteTxRolledBackIsNotAnnounced", func(t *testing.T) {
		k := awaited(t, "n-rollback")
		rollback := errors.New("the business write failed")
		err := db.Transaction(func(tx *gorm.DB) error {
			if err := k.CompleteTx(tx, answer); err != nil {
				return err
			}
			return rollback
		})
		if !errors.Is(err, rollback) {
			t.Fatalf("transaction: got %v, want the rollback", err)
		}
		// Then a committed completion: the only announcement must be this one.
		if err := db.Transaction(func(tx *gorm.DB) error { return k.CompleteTx(tx, answer) }); err != nil {
			t.Fatal(err)
		}
		mustHear(t, "acme/n-rollback")
		mustHearNothing(t) // the rolled-back completion was not announced
	})
	t.Run("Complete", func(t *testing.T) {
		MustComplete(t, awaited(t, "n-complete"), http.StatusCreated, `{}`)
		mustHear(t, "acme/n-complete")
	})
	t.Run("NotAwaitedIsNotAnnounced", func(t *testing.T) {
		MustComplete(t, MustReserve(t, s, reserveRequest("n-alone"), models.Reserved).Key, http.StatusCreated, `{}`)
		k := MustReserve(t, s, reserveRequest("n-alone-released"), models.Reserved).Key
		if err := k.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		mustHearNothing(t)
	})
	t.Run("Release", func(t *testing.T) {
		k := awaited(t, "n-release")
		if err := k.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		mustHear(t, "acme/n-release")
		settled, err := s.KeySettled(context.Background(), "acme", "n-release", 30*time.Second)
		if err != nil || !settled {
			t.Fatalf("KeySettled after release: got %v, %v, want true", settled, err)
		}
	})
	t.Run("Reconnects", func(t *testing.T) {
		// Kill the listener's connection, as a database restart would.
		var killed int
		if err := db.Raw("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND query = ?",
			"LISTEN "+models.SettledChannel).Scan(&killed).Error; err != nil || killed != 1 {
			t.Fatalf("terminate the listener: killed %d (%v), want 1", killed, err)
		}
		select {
		case <-listening:
		case <-time.After(10 * time.Second):
			t.Fatal("the listener did not listen again")
		}
		MustComplete(t, awaited(t, "n-after-reconnect"), http.StatusCreated, `{}`)
		mustHear(t, "acme/n-after-reconnect")
	})
}

func TestKeySettled(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		ctx := context.Background()
		s := models.NewIdempotencyStore(db)
		settled := func(key string, lease time.Duration) bool {
			t.Helper()
			ok, err := s.KeySettled(ctx, "acme", key, lease)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !settled("s-absent", time.Minute) {
			t.Error("an absent key: got in progress, want settled")
		}
		k := MustReserve(t, s, reserveRequest("s-live"), models.Reserved).Key
		if settled("s-live", time.Minute) {
			t.Error("a live owner's key: got settled, want in progress")
		}
		time.Sleep(20 * time.Millisecond)
		if !settled("s-live", 10*time.Millisecond) {
			t.Error("a key whose owner is silent for a whole lease: got in progress, want settled")
		}
		MustComplete(t, k, http.StatusCreated, `{}`)
		if !settled("s-live", time.Minute) {
			t.Error("a completed key: got in progress, want settled")
		}
	})
}
