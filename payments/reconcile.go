package payments

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"

	"checkoutlab/models"
)

// LedgerReader reads every charge the gateway holds. *GatewayClient is one.
type LedgerReader interface {
	Ledger(ctx context.Context) ([]GatewayCharge, error)
}

// Report compares a tenant's orders, payments and side effects with the gateway's ledger.
// In safe operation every list is empty once background work has settled, except
// SuspectedDuplicatePurchases: a customer may well buy the same thing twice, so those are
// listed for a person to review and do not make the report unclean (see Clean).
type Report struct {
	Orders                      int                  `json:"orders"`
	PaidOrders                  int                  `json:"paid_orders"`
	SucceededCharges            int                  `json:"succeeded_charges"`
	DoubleChargedOrders         []DoubleCharge       `json:"double_charged_orders"`
	ChargesWithoutOrder         []string             `json:"charges_without_order"`
	PaidOrdersWithoutCharge     []string             `json:"paid_orders_without_charge"`
	DuplicateSideEffects        []DuplicateEffect    `json:"duplicate_side_effects"`
	UnresolvedPayments          []UnresolvedPayment  `json:"unresolved_payments"`
	StaleOperations             []StaleOperation     `json:"stale_operations"`
	AmountMismatches            []AmountMismatch     `json:"amount_mismatches"`
	ChargedButNotPaid           []ChargeOfOrder      `json:"charged_but_not_paid"`
	WebhookConflicts            []WebhookConflict    `json:"webhook_conflicts"`
	SuspectedDuplicatePurchases []SuspectedDuplicate `json:"suspected_duplicate_purchases"`
	GeneratedAt                 time.Time            `json:"generated_at"`
}

// Names of the report's lists, as the JSON calls them; FindingsOf answers with them.
const (
	FindingDoubleCharged      = "double_charged_orders"
	FindingPaidWithoutCharge  = "paid_orders_without_charge"
	FindingDuplicateEffects   = "duplicate_side_effects"
	FindingUnresolvedPayment  = "unresolved_payments"
	FindingStaleOperation     = "stale_operations"
	FindingAmountMismatch     = "amount_mismatches"
	FindingChargedButNotPaid  = "charged_but_not_paid"
	FindingWebhookConflict    = "webhook_conflicts"
	FindingSuspectedDuplicate = "suspected_duplicate_purchases"
)

// Clean reports whether the report has no finding that needs repair: every list is empty
// except, possibly, suspected duplicate purchases, which are for review only.
func (r *Report) Clean() bool {
	return len(r.DoubleChargedOrders) == 0 && len(r.ChargesWithoutOrder) == 0 && len(r.PaidOrdersWithoutCharge) == 0 &&
		len(r.DuplicateSideEffects) == 0 && len(r.UnresolvedPayments) == 0 && len(r.StaleOperations) == 0 &&
		len(r.AmountMismatches) == 0 && len(r.ChargedButNotPaid) == 0 && len(r.WebhookConflicts) == 0
}

// FindingsOf names the lists of the report that name the order, in the report's order; none
// for an order the report has nothing to say about.
func (r *Report) FindingsOf(orderID string) []string {
	var out []string
	add := func(name string, found bool) {
		if found {
			out = append(out, name)
		}
	}
	add(FindingDoubleCharged, slices.ContainsFunc(r.DoubleChargedOrders, func(d DoubleCharge) bool { return d.OrderID == orderID }))
	add(FindingPaidWithoutCharge, slices.Contains(r.PaidOrdersWithoutCharge, orderID))
	add(FindingDuplicateEffects, slices.ContainsFunc(r.DuplicateSideEffects, func(d DuplicateEffect) bool { return d.OrderID == orderID }))
	add(FindingUnresolvedPayment, slices.ContainsFunc(r.UnresolvedPayments, func(u UnresolvedPayment) bool { return u.OrderID == orderID }))
	add(FindingStaleOperation, slices.ContainsFunc(r.StaleOperations, func(o StaleOperation) bool { return o.OrderID != nil && *o.OrderID == orderID }))
	add(FindingAmountMismatch, slices.ContainsFunc(r.AmountMismatches, func(m AmountMismatch) bool { return m.OrderID == orderID }))
	add(FindingChargedButNotPaid, slices.ContainsFunc(r.ChargedButNotPaid, func(c ChargeOfOrder) bool { return c.OrderID == orderID }))
	add(FindingWebhookConflict, slices.ContainsFunc(r.WebhookConflicts, func(w WebhookConflict) bool { return w.OrderID == orderID }))
	add(FindingSuspectedDuplicate, slices.ContainsFunc(r.SuspectedDuplicatePurchases, func(d SuspectedDuplicate) bool { return slices.Contains(d.OrderIDs, orderID) }))
	return out
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

// AmountMismatch is a charge that names one of the tenant's payments (by its metadata or by
// the payment's gateway key) but is not for the payment's amount and currency, so it settled
// nothing. A succeeded one is money taken for nothing, listed until it is refunded; a failed
// one is listed while its payment is still pending, since it holds the payment's key.
type AmountMismatch struct {
	ChargeID       string `json:"charge_id"`
	Status         string `json:"status"`
	OrderID        string `json:"order_id"`
	PaymentID      string `json:"payment_id,omitempty"`
	ChargeAmount   int64  `json:"charge_amount"`
	ChargeCurrency string `json:"charge_currency"`
	Amount         int64  `json:"amount"` // what the payment (or, without one, the order) is for
	Currency       string `json:"currency"`
}

// ChargeOfOrder is a succeeded charge of one of the tenant's orders.
type ChargeOfOrder struct {
	ChargeID string `json:"charge_id"`
	OrderID  string `json:"order_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// WebhookConflict is a webhook-id that was delivered again with another payload than the one
// processed first. The shop applied only the first; a real provider never changes an event, so
// this is a forgery with a leaked secret or a provider bug, for a person to look at.
type WebhookConflict struct {
	EventID   string    `json:"event_id"`
	Type      string    `json:"type"`
	ChargeID  string    `json:"charge_id"`
	PaymentID string    `json:"payment_id"`
	OrderID   string    `json:"order_id"`
	At        time.Time `json:"at"`
}

// SuspectedDuplicate is a group of paid orders of one customer (the same e-mail address), with
// the same lines, placed within DuplicateWindow of the first of them under different
// idempotency keys: the signature of a client that made a new key per retry. It may also be a
// customer who really wanted two, so it is listed for review, never counted as unclean. An
// operator who dismisses one of the orders as a real purchase takes it out of its group.
type SuspectedDuplicate struct {
	OrderIDs []string  `json:"order_ids"`
	Amount   int64     `json:"amount"` // of each order
	Currency string    `json:"currency"`
	First    time.Time `json:"first_created"`
	Last     time.Time `json:"last_created"`
}

// DuplicateWindow is how close together the orders of a suspected duplicate purchase are.
const DuplicateWindow = 10 * time.Minute

// StaleLister lists stale idempotency keys. *models.IdempotencyStore is one.
type StaleLister interface {
	ListStale(ctx context.Context, tenantID string, at time.Time, olderThan time.Duration, limit int) ([]models.IdempotencyRecord, error)
}

// DismissedLister lists the orders an operator dismissed as real purchases of their own.
// *models.DecisionStore is one.
type DismissedLister interface {
	Dismissed(ctx context.Context, tenantID string) (map[string]bool, error)
}

// Reconciler builds reconciliation reports.
type Reconciler struct {
	DB      *gorm.DB
	Gateway LedgerReader
	Keys    StaleLister
	// Dismissed, when set, takes dismissed orders out of the suspected duplicates.
	Dismissed DismissedLister
	// Grace is how long a payment may stay pending before it counts as unresolved: longer than
	// a lease plus a completer pass, so work in flight is not reported. A succeeded charge of an
	// unpaid order is reported after the same grace.
	Grace time.Duration
}

// Report builds the tenant's report. It fails if the gateway's ledger cannot be read: a
// report without the ledger would claim a safety it cannot check.
func (r *Reconciler) Report(ctx context.Context, tenantID string) (*Report, error) {
	rep, _, err := r.report(ctx, tenantID)
	return rep, err
}

// reconcileOrder is what the report reads of an order. Email and lines are read only to
// recognise one customer buying the same lines twice; the report never shows them.
type reconcileOrder struct {
	ID        string
	Status    string
	Amount    int64
	Currency  string
	Email     string
	CreatedAt time.Time
	lines     string
}

// report builds the report and also returns, per order of the tenant, every charge of it the
// ledger holds (any status, oldest first), for the triage desk to act on.
func (r *Reconciler) report(ctx context.Context, tenantID string) (*Report, map[string][]GatewayCharge, error) {
	charges, err := r.Gateway.Ledger(ctx)
	if err != nil {
		return nil, nil, models.ErrGatewayUnavailable.Msgf("the gateway's ledger could not be read").Wrap(err)
	}
	db := r.DB.WithContext(ctx)
	var orders []reconcileOrder
	if err := db.Model(&models.Order{}).Select("id, status, amount, currency, email, created_at").
		Where("tenant_id = ?", tenantID).Find(&orders).Error; err != nil {
		return nil, nil, fmt.Errorf("reconcile orders: %w", err)
	}
	var pays []models.Payment
	if err := db.Where("tenant_id = ?", tenantID).Order("updated_at").Find(&pays).Error; err != nil {
		return nil, nil, fmt.Errorf("reconcile payments: %w", err)
	}
	now := time.Now().UTC()
	cutoff := now.Add(-r.Grace)

	rep := &Report{Orders: len(orders), GeneratedAt: now,
		DoubleChargedOrders: []DoubleCharge{}, ChargesWithoutOrder: []string{}, PaidOrdersWithoutCharge: []string{},
		DuplicateSideEffects: []DuplicateEffect{}, UnresolvedPayments: []UnresolvedPayment{}, StaleOperations: []StaleOperation{},
		AmountMismatches: []AmountMismatch{}, ChargedButNotPaid: []ChargeOfOrder{}, WebhookConflicts: []WebhookConflict{},
		SuspectedDuplicatePurchases: []SuspectedDuplicate{}}
	known := map[string]*reconcileOrder{}
	ids := make([]string, 0, len(orders))
	for i := range orders {
		o := &orders[i]
		known[o.ID] = o
		ids = append(ids, o.ID)
		if o.Status == models.OrderPaid {
			rep.PaidOrders++
		}
	}
	payByID, payByKey := map[string]*models.Payment{}, map[string]*models.Payment{}
	for i := range pays {
		payByID[pays[i].ID], payByKey[pays[i].GatewayKey] = &pays[i], &pays[i]
	}

	byOrder := map[string][]GatewayCharge{}   // succeeded charges per order
	chargesOf := map[string][]GatewayCharge{} // every charge per order
	for _, c := range charges {
		// A charge is the tenant's if it says so, or if it was made under one of the tenant's
		// payment keys (a charge planted under our key need not carry our metadata).
		pay := payByKey[c.IdempotencyKey]
		if p, ok := payByID[c.Metadata["payment_id"]]; ok && c.Metadata["tenant"] == tenantID {
			pay = p
		}
		if c.Metadata["tenant"] != tenantID && pay == nil {
			continue
		}
		orderID := c.Metadata["order_id"]
		if pay != nil {
			orderID = pay.OrderID
		}
		o := known[orderID]
		if o != nil {
			chargesOf[o.ID] = append(chargesOf[o.ID], c)
		}
		if o != nil && (c.Status == "succeeded" || c.Status == "failed") {
			fits := pay != nil && chargeFits(pay, c) || pay == nil && c.Amount == o.Amount && c.Currency == o.Currency
			pending := pay != nil && pay.Status == models.PaymentPending
			if !fits && (c.Status == "succeeded" || pending) {
				m := AmountMismatch{ChargeID: c.ID, Status: c.Status, OrderID: o.ID, ChargeAmount: c.Amount,
					ChargeCurrency: c.Currency, Amount: o.Amount, Currency: o.Currency}
				if pay != nil {
					m.PaymentID, m.Amount, m.Currency = pay.ID, pay.Amount, pay.Currency
				}
				rep.AmountMismatches = append(rep.AmountMismatches, m)
			}
		}
		if c.Status != "succeeded" || c.Metadata["tenant"] != tenantID {
			continue
		}
		rep.SucceededCharges++
		if o == nil {
			rep.ChargesWithoutOrder = append(rep.ChargesWithoutOrder, c.ID)
			continue
		}
		byOrder[o.ID] = append(byOrder[o.ID], c)
		if o.Status != models.OrderPaid && !time.Unix(c.Created, 0).After(cutoff) {
			rep.ChargedButNotPaid = append(rep.ChargedButNotPaid, ChargeOfOrder{ChargeID: c.ID, OrderID: o.ID, Amount: c.Amount, Currency: c.Currency})
		}
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
		return nil, nil, err
	}
	for _, id := range ids {
		if receipts[id] > 1 || shipments[id] > 1 {
			rep.DuplicateSideEffects = append(rep.DuplicateSideEffects, DuplicateEffect{OrderID: id, Receipts: receipts[id], Shipments: shipments[id]})
		}
	}
	for _, p := range pays {
		if p.Status == models.PaymentPending && p.UpdatedAt.Before(cutoff) {
			rep.UnresolvedPayments = append(rep.UnresolvedPayments, UnresolvedPayment{PaymentID: p.ID, OrderID: p.OrderID, Since: p.UpdatedAt})
		}
	}
	if r.Keys != nil {
		stale, err := r.Keys.ListStale(ctx, tenantID, now, r.Grace, 100)
		if err != nil {
			return nil, nil, err
		}
		for _, k := range stale {
			rep.StaleOperations = append(rep.StaleOperations, StaleOperation{Key: k.Key, Endpoint: k.Endpoint,
				RecoveryPoint: k.RecoveryPoint, OrderID: k.OrderID, Since: k.UpdatedAt})
		}
	}
	if err := db.Table("webhook_events AS w").Joins("JOIN payments AS p ON p.id = w.payment_id").
		Select("w.event_id, w.type, w.charge_id, w.payment_id, p.order_id, w.conflict_at AS at").
		Where("p.tenant_id = ? AND w.conflict_at IS NOT NULL", tenantID).Order("w.conflict_at, w.event_id").
		Scan(&rep.WebhookConflicts).Error; err != nil {
		return nil, nil, fmt.Errorf("reconcile webhook conflicts: %w", err)
	}
	if rep.SuspectedDuplicatePurchases, err = r.suspectedDuplicates(ctx, tenantID, orders); err != nil {
		return nil, nil, err
	}
	sort.Slice(rep.DoubleChargedOrders, func(i, j int) bool { return rep.DoubleChargedOrders[i].OrderID < rep.DoubleChargedOrders[j].OrderID })
	sort.Strings(rep.ChargesWithoutOrder)
	sort.Strings(rep.PaidOrdersWithoutCharge)
	return rep, chargesOf, nil
}

// suspectedDuplicates groups the tenant's paid orders by customer (e-mail, case-insensitive),
// currency and lines (SKU and quantity, in any order), and lists each run of two or more
// placed within DuplicateWindow of the run's first. Orders an operator dismissed are left out.
func (r *Reconciler) suspectedDuplicates(ctx context.Context, tenantID string, orders []reconcileOrder) ([]SuspectedDuplicate, error) {
	dismissed := map[string]bool{}
	if r.Dismissed != nil {
		var err error
		if dismissed, err = r.Dismissed.Dismissed(ctx, tenantID); err != nil {
			return nil, err
		}
	}
	var lines []models.OrderLine
	paid := r.DB.WithContext(ctx).Model(&models.Order{}).Select("id").Where("tenant_id = ? AND status = ?", tenantID, models.OrderPaid)
	if err := r.DB.WithContext(ctx).Select("order_id, sku, quantity").Where("order_id IN (?)", paid).
		Order("order_id, sku").Find(&lines).Error; err != nil {
		return nil, fmt.Errorf("reconcile order lines: %w", err)
	}
	linesOf := map[string]string{}
	for _, l := range lines {
		linesOf[l.OrderID] += fmt.Sprintf("%s×%d;", l.SKU, l.Quantity)
	}
	groups := map[string][]*reconcileOrder{}
	for i := range orders {
		o := &orders[i]
		if o.Status != models.OrderPaid || dismissed[o.ID] {
			continue
		}
		k := strings.ToLower(strings.TrimSpace(o.Email)) + "|" + o.Currency + "|" + linesOf[o.ID]
		groups[k] = append(groups[k], o)
	}
	out := []SuspectedDuplicate{}
	for _, g := range groups {
		sort.Slice(g, func(i, j int) bool { return g[i].CreatedAt.Before(g[j].CreatedAt) })
		for start := 0; start < len(g); {
			end := start + 1
			for end < len(g) && g[end].CreatedAt.Sub(g[start].CreatedAt) <= DuplicateWindow {
				end++
			}
			if end-start > 1 {
				d := SuspectedDuplicate{Amount: g[start].Amount, Currency: g[start].Currency,
					First: g[start].CreatedAt, Last: g[end-1].CreatedAt}
				for _, o := range g[start:end] {
					d.OrderIDs = append(d.OrderIDs, o.ID)
				}
				out = append(out, d)
			}
			start = end
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].First.Before(out[j].First) })
	return out, nil
}
