package payments_test

import (
	"context"
	"strings"
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

// fixedLedger is a gateway ledger of the given charges.
type fixedLedger []payments.GatewayCharge

func (l fixedLedger) Ledger(context.Context) ([]payments.GatewayCharge, error) { return l, nil }

// mustOrderAt places an order of quantity camp mugs for email, created at `at`, with status.
func mustOrderAt(t *testing.T, db *gorm.DB, email string, quantity int, at time.Time, status string) string {
	t.Helper()
	var id string
	err := db.Transaction(func(tx *gorm.DB) error {
		o, err := models.CreateOrderTx(tx, models.NewOrder{TenantID: "acme", Email: email, Items: []models.Item{{SKU: "camp-mug", Quantity: quantity}},
			Shipping: models.Address{Name: "Ada", Address: "1 Way", City: "London", PostalCode: "N1", Country: "GB"}})
		if err != nil {
			return err
		}
		id = o.ID
		return tx.Model(&models.Order{}).Where("id = ?", o.ID).Updates(map[string]any{"status": status, "created_at": at.UTC()}).Error
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestReconcileSuspectedDuplicates: paid orders of one customer (e-mail in any case) with the
// same lines, placed within ten minutes of the first, are one suspected duplicate; other lines,
// another customer, an unpaid order or a later order are not; a dismissed order leaves its group.
// Suspected duplicates never make the report unclean.
func TestReconcileSuspectedDuplicates(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		t0 := time.Now().Add(-time.Hour)
		first := mustOrderAt(t, db, "ada@example.com", 2, t0, models.OrderPaid)
		second := mustOrderAt(t, db, "ADA@example.com", 2, t0.Add(5*time.Minute), models.OrderPaid)
		mustOrderAt(t, db, "ada@example.com", 2, t0.Add(11*time.Minute), models.OrderPaid)          // past the first's window
		mustOrderAt(t, db, "ada@example.com", 1, t0.Add(time.Minute), models.OrderPaid)             // other lines
		mustOrderAt(t, db, "bob@example.com", 2, t0.Add(time.Minute), models.OrderPaid)             // another customer
		mustOrderAt(t, db, "ada@example.com", 2, t0.Add(2*time.Minute), models.OrderPendingPayment) // not paid
		r := &payments.Reconciler{DB: db, Gateway: emptyLedger{}, Dismissed: models.NewDecisionStore(db)}
		rep, err := r.Report(context.Background(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.SuspectedDuplicatePurchases) != 1 || strings.Join(rep.SuspectedDuplicatePurchases[0].OrderIDs, ",") != first+","+second {
			t.Fatalf("got %+v, want one group of %s and %s", rep.SuspectedDuplicatePurchases, first, second)
		}
		if got := rep.FindingsOf(second); len(got) == 0 || got[len(got)-1] != payments.FindingSuspectedDuplicate {
			t.Errorf("findings of %s: got %v, want suspected_duplicate_purchases", second, got)
		}
		if err := db.Transaction(func(tx *gorm.DB) error {
			return models.RecordDecisionTx(tx, &models.Decision{TenantID: "acme", OrderID: second, Action: models.ActionDismissDuplicate,
				Who: "api_key:test", Result: models.ResultDismissed, Reason: "a gift for a friend"})
		}); err != nil {
			t.Fatal(err)
		}
		if rep, err = r.Report(context.Background(), "acme"); err != nil || len(rep.SuspectedDuplicatePurchases) != 0 {
			t.Errorf("after dismissing %s: got %+v %v, want none", second, rep.SuspectedDuplicatePurchases, err)
		}
	})
	clean := payments.Report{SuspectedDuplicatePurchases: []payments.SuspectedDuplicate{{OrderIDs: []string{"o1", "o2"}}}}
	if !clean.Clean() {
		t.Errorf("Clean with only a suspected duplicate: got false, want true")
	}
	if dirty := (payments.Report{ChargedButNotPaid: []payments.ChargeOfOrder{{ChargeID: "ch_1"}}}); dirty.Clean() {
		t.Errorf("Clean with a charge on an unpaid order: got true, want false")
	}
}

// TestReconcileChargesOfUnpaidOrders: a succeeded charge of an order that is not paid is
// listed once it is older than the grace (work in flight is not), and a charge that names the
// order but not its amount is an amount mismatch at once.
func TestReconcileChargesOfUnpaidOrders(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		orderID := mustOrderAt(t, db, "ada@example.com", 2, time.Now(), models.OrderPendingPayment)
		meta := map[string]string{"tenant": "acme", "order_id": orderID}
		ledger := fixedLedger{
			{ID: "ch_old", Status: "succeeded", Amount: 2800, Currency: "USD", Metadata: meta, Created: time.Now().Add(-2 * time.Hour).Unix()},
			{ID: "ch_new", Status: "succeeded", Amount: 2800, Currency: "USD", Metadata: meta, Created: time.Now().Unix()},
			{ID: "ch_cent", Status: "succeeded", Amount: 1, Currency: "USD", Metadata: meta, Created: time.Now().Unix()},
			{ID: "ch_other", Status: "succeeded", Amount: 2800, Currency: "USD", Metadata: map[string]string{"tenant": "globex", "order_id": orderID}},
		}
		r := &payments.Reconciler{DB: db, Gateway: ledger, Grace: time.Hour}
		rep, err := r.Report(context.Background(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.ChargedButNotPaid) != 1 || rep.ChargedButNotPaid[0].ChargeID != "ch_old" {
			t.Errorf("charged_but_not_paid: got %+v, want only ch_old (ch_new is within the grace)", rep.ChargedButNotPaid)
		}
		if len(rep.AmountMismatches) != 1 || rep.AmountMismatches[0].ChargeID != "ch_cent" || rep.AmountMismatches[0].Amount != 2800 {
			t.Errorf("amount_mismatches: got %+v, want ch_cent against the order's 2800", rep.AmountMismatches)
		}
		if len(rep.DoubleChargedOrders) != 1 || len(rep.DoubleChargedOrders[0].Charges) != 3 {
			t.Errorf("double_charged_orders: got %+v, want the order with its three charges (not globex's)", rep.DoubleChargedOrders)
		}
	})
}
