package handlers

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// countingFinder counts the lookups that reach the database.
type countingFinder struct {
	TenantFinder
	n atomic.Int64
}

func (f *countingFinder) ByAPIKey(ctx context.Context, key string) (*models.Tenant, error) {
	f.n.Add(1)
	return f.TenantFinder.ByAPIKey(ctx, key)
}

// TestTenantCache: a found tenant is read once per TTL; an unknown key is asked every time; a
// key revoked in the database works until its entry expires, and not after.
func TestTenantCache(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		ctx := context.Background()
		finder := &countingFinder{TenantFinder: models.NewTenantStore(db)}
		clock := time.Now()
		cache := newTenantCache(finder, time.Minute)
		cache.now = func() time.Time { return clock }

		for range 3 {
			got, err := cache.ByAPIKey(ctx, "sk_test_acme")
			if err != nil || got.ID != "acme" {
				t.Fatalf("got %v, %v, want acme", got, err)
			}
			got.Name = "changed by a request" // a copy: must not reach the next caller
		}
		if n := finder.n.Load(); n != 1 {
			t.Errorf("three lookups within the TTL: got %d database reads, want 1", n)
		}
		if got, _ := cache.ByAPIKey(ctx, "sk_test_acme"); got.Name == "changed by a request" {
			t.Errorf("a caller's change reached the cache")
		}

		for range 2 {
			if _, err := cache.ByAPIKey(ctx, "sk_test_nobody"); !errors.Is(err, models.ErrUnauthorized) {
				t.Fatalf("unknown key: got %v, want unauthorized", err)
			}
		}
		if n := finder.n.Load(); n != 3 {
			t.Errorf("two unknown lookups: got %d database reads in all, want 3 (unknown keys are not cached)", n)
		}

		// An operator revokes the key in the database.
		if err := db.Model(&models.Tenant{}).Where("id = ?", "acme").Update("api_key_hash", "revoked").Error; err != nil {
			t.Fatal(err)
		}
		if _, err := cache.ByAPIKey(ctx, "sk_test_acme"); err != nil {
			t.Errorf("within the TTL: got %v, want the cached tenant", err)
		}
		clock = clock.Add(time.Minute + time.Second)
		if _, err := cache.ByAPIKey(ctx, "sk_test_acme"); !errors.Is(err, models.ErrUnauthorized) {
			t.Errorf("after the TTL: got %v, want unauthorized", err)
		}
	})
}
