package payments

import (
	"context"
	"fmt"
	"sort"
	"time"

	"gorm.io/gorm"

	"checkoutlab/models"
)

// LedgerReader reads every charge the gateway holds. *GatewayClient is one.
type LedgerReader interface {
	Ledger(ctx context.Context) ([]GatewayCharge, error)
}

// Report compares a tenant's orders, payments and side effects with the gateway's ledger.
// In safe operation every list is empty once background work has settled.
type Report struct {
	Orders                  int                 `json:"orders"`
	PaidOrders              int                 `json:"paid_orders"`
	SucceededCharges        int                 `json:"succeeded_charges"`
	DoubleChargedOrders     []DoubleCharge      `json:"double_charged_orders"`
	ChargesWithoutOrder     []string            `json:"charges_without_order"`
	PaidOrdersWithoutCharge []string            `json:"paid_orders_without_charge"`
	DuplicateSideEffects    []DuplicateEffect   `json:"duplicate_side_effects"`
	UnresolvedPayments      []UnresolvedPayment `json:"unresolved_payments"`
	StaleOperations         []StaleOperation    `json:"stale_operations"`
	GeneratedAt             time.Time           `json:"generated_at"`
}

// DoubleCharge is an order with more than one succeeded, unrefunded charge.
type DoubleCharge struct {
	OrderID string   `json:"order_id"`
	Charges []string `json:"charges"`
	Amount  int64    `json:"amount"` // what was taken too much, in minor units
}

// DuplicateEffect is an order with more than one receipt or shipment.
type DuplicateEffect struct {
	OrderID   string `json:"order_id"`
	Receipts  int    `json:"receipts"`
	Shipments int    `json:"shipments"`
}

// UnresolvedPayment is a payment whose outcome has been unknown for longer than it should be.
type UnresolvedPayment struct {
	PaymentID string    `json:"payment_id"`
	OrderID   string    `json:"order_id"`
	Since     time.Time `json:"since"`
}

// StaleOperation is an idempotency key still in progress that nobody has touched for longer
// than the grace period: an operation whose outcome nobody has settled (for example an order
// request released after a 5xx whose client never came back). It is listed for a person to
// look at; it is never expired silently.
type StaleOperation struct {
	Key           string    `json:"idempotency_key"`
	Endpoint      string    `json:"endpoint"`
	RecoveryPoint string    `json:"recovery_point"`
	OrderID       *string   `json:"order_id"`
	Since         time.Time `json:"since"`
}

// StaleLister lists stale idempotency keys. *models.IdempotencyStore is one.
type StaleLister interface {
	ListStale(ctx context.Context, tenantID string, at time.Time, olderThan time.Duration, limit int) ([]models.IdempotencyRecord, error)
}

// Reconciler builds reconciliation reports.
type Reconciler struct {
	DB      *gorm.DB
	Gateway LedgerReader
	Keys    StaleLister
	// Grace is how long a payment may stay pending before it counts as unresolved: longer than
	// a lease plus a completer pass, so work in flight is not reported.
	Grace time.Duration
}

// Report builds the tenant's report. It fails if the gateway's ledger cannot be read: a
// report without the ledger would claim a safety it cannot check.
func (r *Reconciler) Report(ctx context.Context, tenantID string) (*Report, error) {
	charges, err := r.Gateway.Ledger(ctx)
	if err != nil {
		return nil, models.ErrGatewayUnavailable.Msgf("the gateway's ledger could not be read").Wrap(err)
	}
	db := r.DB.WithContext(ctx)
	var orders []models.Order
	if err := db.Select("id, status, amount").Where("tenant_id = ?", tenantID).Find(&orders).Error; err != nil {
		return nil, fmt.Errorf("reconcile orders: %w", err)
	}
	var pending []models.Payment
	cutoff := time.Now().UTC().Add(-r.Grace)
	if err := db.Where("tenant_id = ? AND status = ? AND updated_at < ?", tenantID, models.PaymentPending, cutoff).
		Order("updated_at").Find(&pending).Error; err != nil {
		return nil, fmt.Errorf("reconcile payments: %w", err)
	}

	rep := &Report{Orders: len(orders), GeneratedAt: time.Now().UTC(),
		DoubleChargedOrders: []DoubleCharge{}, ChargesWithoutOrder: []string{}, PaidOrdersWithoutCharge: []string{},
		DuplicateSideEffects: []DuplicateEffect{}, UnresolvedPayments: []UnresolvedPayment{}, StaleOperations: []StaleOperation{}}
	known := map[string]models.Order{}
	ids := make([]string, 0, len(orders))
	for _, o := range orders {
		known[o.ID] = o
		ids = append(ids, o.ID)
		if o.Status == models.OrderPaid {
			rep.PaidOrders++
		}
	}

	byOrder := map[string][]GatewayCharge{}
	for _, c := range charges {
		if c.Metadata["tenant"] != tenantID || c.Status != "succeeded" {
			continue
		}
		rep.SucceededCharges++
		if _, ok := known[c.Metadata["order_id"]]; !ok {
			rep.ChargesWithoutOrder = append(rep.ChargesWithoutOrder, c.ID)
			continue
		}
		byOrder[c.Metadata["order_id"]] = append(byOrder[c.Metadata["order_id"]], c)
	}
	for orderID, cs := range byOrder {
		if len(cs) > 1 {
			dc := DoubleCharge{OrderID: orderID}
			for i, c := range cs {
				dc.Charges = append(dc.Charges, c.ID)
				if i > 0 {
					dc.Amount += c.Amount
				}
			}
			sort.Strings(dc.Charges)
			rep.DoubleChargedOrders = append(rep.DoubleChargedOrders, dc)
		}
	}
	for _, o := range orders {
		if o.Status == models.OrderPaid && len(byOrder[o.ID]) == 0 {
			rep.PaidOrdersWithoutCharge = append(rep.PaidOrdersWithoutCharge, o.ID)
		}
	}
	receipts, shipments, err := models.NewSideEffectStore(r.DB).CountByOrder(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if receipts[id] > 1 || shipments[id] > 1 {
			rep.DuplicateSideEffects = append(rep.DuplicateSideEffects, DuplicateEffect{OrderID: id, Receipts: receipts[id], Shipments: shipments[id]})
		}
	}
	for _, p := range pending {
		rep.UnresolvedPayments = append(rep.UnresolvedPayments, UnresolvedPayment{PaymentID: p.ID, OrderID: p.OrderID, Since: p.UpdatedAt})
	}
	if r.Keys != nil {
		stale, err := r.Keys.ListStale(ctx, tenantID, time.Now(), r.Grace, 100)
		if err != nil {
			return nil, err
		}
		for _, k := range stale {
			rep.StaleOperations = append(rep.StaleOperations, StaleOperation{Key: k.Key, Endpoint: k.Endpoint,
				RecoveryPoint: k.RecoveryPoint, OrderID: k.OrderID, Since: k.UpdatedAt})
		}
	}
	sort.Slice(rep.DoubleChargedOrders, func(i, j int) bool { return rep.DoubleChargedOrders[i].OrderID < rep.DoubleChargedOrders[j].OrderID })
	sort.Strings(rep.ChargesWithoutOrder)
	sort.Strings(rep.PaidOrdersWithoutCharge)
	return rep, nil
}
