package payments_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
)

type emptyLedger struct{}

func (emptyLedger) Ledger(context.Context) ([]payments.GatewayCharge, error) { return nil, nil }

// TestReconcileStaleOperations: an operation left in progress and untouched for longer than
// the grace period (here an order request whose client never came back) is listed for a
// person, for its own tenant only; a recent one is not.
func TestReconcileStaleOperations(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		keys := models.NewIdempotencyStore(db)
		MustKey(t, keys, "abandoned", false)
		MustKey(t, keys, "recent", false)
		old := time.Now().UTC().Add(-time.Hour)
		if err := db.Model(&models.IdempotencyRecord{}).Where("key = ?", "abandoned").
			Updates(map[string]any{"updated_at": old, "locked_at": old}).Error; err != nil {
			t.Fatal(err)
		}
		r := &payments.Reconciler{DB: db, Gateway: emptyLedger{}, Keys: keys, Grace: time.Minute}
		rep, err := r.Report(context.Background(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.StaleOperations) != 1 || rep.StaleOperations[0].Key != "abandoned" {
			t.Errorf("acme: got %+v, want only the abandoned key", rep.StaleOperations)
		}
		rep, err = r.Report(context.Background(), "globex")
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.StaleOperations) != 0 {
			t.Errorf("globex: got %+v, want none (another tenant's key)", rep.StaleOperations)
		}
	})
}
