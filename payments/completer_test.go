package payments_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
)

// TestCompleterTakesTenantsInTurn: a pass of the completer gives every tenant with abandoned
// work a turn before it comes back to one, so a tenant with many stuck operations cannot hold
// back another tenant's one. Here acme abandoned three operations before globex abandoned
// one; a pass of two must finish globex's. (Oldest first alone would take two of acme's.)
func TestCompleterTakesTenantsInTurn(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		ctx := context.Background()
		keys := models.NewIdempotencyStore(db)
		abandon := func(tenant, key string) {
			t.Helper()
			// Reserved and never worked on: its owner died before its first phase, and with a
			// lease of a millisecond it is abandoned at once.
			res, err := keys.Reserve(ctx, models.ReserveRequest{TenantID: tenant, Key: key, Principal: "api_key:test",
				Endpoint: "POST /api/v1/checkout", Fingerprint: strings.Repeat("0", 64), Params: []byte("{}"), Lease: time.Millisecond})
			if err != nil || res.Outcome != models.Reserved {
				t.Fatalf("reserve %s/%s: got %+v %v, want reserved", tenant, key, res, err)
			}
			time.Sleep(5 * time.Millisecond) // each key older than the next
		}
		for i := range 3 {
			abandon("acme", fmt.Sprintf("acme-%d", i))
		}
		abandon("globex", "globex-0")

		c := &payments.Completer{Keys: keys, Service: &payments.Service{DB: db},
			Endpoints: map[string]payments.Operation{"POST /api/v1/checkout": payments.OperationCheckout},
			Lease:     time.Millisecond, Batch: 2}
		done, err := c.RunOnce(ctx)
		if err != nil || done != 2 {
			t.Fatalf("RunOnce: got %d finished, %v; want 2", done, err)
		}
		left := map[string]bool{}
		for _, k := range []string{"acme-0", "acme-1", "acme-2"} {
			_, err := keys.Get(ctx, "acme", k)
			left[k] = err == nil
		}
		if _, err := keys.Get(ctx, "globex", "globex-0"); err == nil {
			t.Errorf("globex's abandoned operation is still there after a pass of 2 (acme's left: %v): tenants did not take turns", left)
		}
		if left["acme-0"] || !left["acme-1"] || !left["acme-2"] {
			t.Errorf("acme's operations left: got %v, want the oldest (acme-0) finished, the other two left", left)
		}
	})
}
