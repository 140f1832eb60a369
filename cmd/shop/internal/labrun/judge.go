package labrun

// How the lab judges a run: only through what the shop and the gateway show over HTTP — the
// gateway's ledger (where money moved), the shop's orders with their payments, receipts and
// shipments (GET /api/v1/orders), and each order's journal (GET /api/v1/orders/{id}/events).
// These are the views an operator has, so the same judge works for a lab stack and for a shop
// that was already running.

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"checkoutlab/models"
	"checkoutlab/payments"
	"checkoutlab/payments/lab"
)

// order is an order as GET /api/v1/orders shows it, as much as the invariants need.
type order struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Email    string `json:"email"`
	Payments []struct {
		ID              string  `json:"id"`
		Status          string  `json:"status"`
		GatewayChargeID *string `json:"gateway_charge_id"`
	} `json:"payments"`
	Receipts int `json:"receipts"`

	tenant string
}

// settle waits, at most t.settleWithin, until background work is done: the gateway has no
// webhook delivery left to make (of those made since the run began), no payment of the run is
// still waiting for someone (a retry, the completer) to find out what the gateway did, and
// every paid order has its receipt. Then it waits a little longer for stragglers (duplicates).
// It returns what was still going on if it stopped waiting first, or "".
func (t *target) settle(ctx context.Context, since time.Time, email string) string {
	deadline := time.Now().Add(t.settleWithin)
	var unsettled []string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		unsettled = unsettled[:0]
		deliveries, err := Deliveries(ctx, t.http, t.gateway, t.controlToken)
		if err != nil {
			unsettled = append(unsettled, err.Error())
		}
		for _, x := range deliveries {
			if x.Status == "pending" && !x.Created.Before(since) {
				unsettled = append(unsettled, "a webhook delivery is pending")
			}
		}
		orders, err := t.ordersSince(ctx, since, email)
		if err != nil {
			unsettled = append(unsettled, err.Error())
		}
		for _, o := range orders {
			if o.Status == models.OrderPaid && o.Receipts == 0 {
				unsettled = append(unsettled, "order "+o.ID+" is paid and waits for its receipt")
			}
			for _, p := range o.Payments {
				// Pending with no charge recorded: the outcome is still to be found out — by a
				// retry or the completer, resuming the payment's key. A shop that keeps no keys
				// (server_idempotency off) has nothing to resume: such a payment stays pending
				// until its order expires, and waiting for it would only run out the clock.
				if p.Status == models.PaymentPending && p.GatewayChargeID == nil && !t.keepsNoKeys {
					unsettled = append(unsettled, "payment "+p.ID+" is pending, its outcome not yet found out")
				}
			}
		}
		if len(unsettled) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // duplicate jobs and the journal's batch writer
	if len(unsettled) == 0 {
		return ""
	}
	return fmt.Sprintf("after %s: %s", t.settleWithin, strings.Join(slices.Compact(unsettled), "; "))
}

// ordersSince lists the run's orders: every tenant's orders created since the run began for
// the run's customer, email.
func (t *target) ordersSince(ctx context.Context, since time.Time, email string) ([]order, error) {
	var all []order
	for _, tenant := range slices.Sorted(maps.Keys(t.apiKeys)) {
		var page struct{ Data []order }
		q := url.Values{"created_after": {since.UTC().Format(time.RFC3339Nano)}, "limit": {"500"}}
		if err := getJSON(ctx, t.http, t.shop+"/api/v1/orders?"+q.Encode(), t.apiKeys[tenant], &page); err != nil {
			return nil, fmt.Errorf("list %s's orders: %w", tenant, err)
		}
		for _, o := range page.Data {
			if o.Email == email {
				o.tenant = tenant
				all = append(all, o)
			}
		}
	}
	return all, nil
}

// evaluate checks the invariants over the orders created since the run began and keeps the
// run's evidence in res: the gateway's ledger and delivery log (which outlive a killed shop),
// the orders' journals with the client's own events, and the shop's reconciliation report.
func (t *target) evaluate(ctx context.Context, s lab.Scenario, since time.Time, c *client, res *lab.Result) error {
	charges, err := Ledger(ctx, t.http, t.gateway, t.controlToken)
	if err != nil {
		return err
	}
	deliveries, err := Deliveries(ctx, t.http, t.gateway, t.controlToken)
	if err != nil {
		return err
	}
	orders, err := t.ordersSince(ctx, since, c.email())
	if err != nil {
		return err
	}

	res.Checks = checksOf(s, orders, charges, c.answerSets())
	repair, err := t.repairChecks(ctx, s, orders, charges)
	if err != nil {
		return err
	}
	res.Checks = append(res.Checks, repair...)
	res.Ledger, res.Deliveries = t.runsOwn(orders, charges, deliveries)

	rows := c.rows()
	seen := map[string]bool{} // orders sharing a key share that key's events: show each once
	for _, o := range orders {
		var events struct{ Data []lab.Row }
		if err := getJSON(ctx, t.http, t.shop+"/api/v1/orders/"+o.ID+"/events", t.apiKeys[o.tenant], &events); err != nil {
			return fmt.Errorf("read the journal of %s: %w", o.ID, err)
		}
		for _, ev := range events.Data {
			id := ev.At.String() + ev.Actor + ev.Kind + ev.Detail
			if !seen[id] {
				seen[id] = true
				rows = append(rows, ev)
			}
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].At.Before(rows[j].At) })
	res.Timeline = rows

	// The report of the run's first tenant, as an operator would read it after the run.
	var report payments.Report
	if err := getJSON(ctx, t.http, t.shop+"/api/v1/reconciliation", t.apiKeys[firstTenant(s)], &report); err == nil {
		res.Reconciliation = &report
	}
	return nil
}

// firstTenant is the tenant of s's first checkout: acme unless it says otherwise.
func firstTenant(s lab.Scenario) string {
	for _, step := range s.Steps {
		if step.Checkout != nil && step.Checkout.Tenant != "" {
			return step.Checkout.Tenant
		}
	}
	return "acme"
}

// runsOwn keeps the charges of the run's orders and their deliveries: on a lab stack that is
// everything the gateway holds, on a running shop only what the run did. The log comes
// newest first; the snapshot keeps it oldest first, like the ledger.
func (t *target) runsOwn(orders []order, charges []Charge, deliveries []lab.Delivery) ([]Charge, []lab.Delivery) {
	ours, ourCharges := map[string]bool{}, map[string]bool{}
	for _, o := range orders {
		ours[o.ID] = true
	}
	var ledger []Charge
	for _, c := range charges {
		if t.db != nil || ours[c.Metadata["order_id"]] {
			ledger = append(ledger, c)
			ourCharges[c.ID] = true
		}
	}
	var log []lab.Delivery
	for _, d := range slices.Backward(deliveries) {
		if ourCharges[d.ChargeID] {
			log = append(log, d)
		}
	}
	return ledger, log
}

// checksOf checks the invariants of scenario s over the run's orders, the gateway's charges
// and, per tenant/key, the order ids the client's answers named.
func checksOf(s lab.Scenario, orders []order, charges []Charge, answers map[string]map[string]bool) []lab.Check {
	chargesOf, chargedPayment := map[string]int{}, map[string]bool{}
	for _, c := range charges {
		if c.MoneyMoved() {
			chargesOf[c.Metadata["order_id"]]++
			chargedPayment[c.Metadata["payment_id"]] = true
		}
	}
	maxCharges, total := 0, 0
	for _, o := range orders {
		maxCharges = max(maxCharges, chargesOf[o.ID])
		total += chargesOf[o.ID]
	}
	maxOrders := 0
	for _, set := range answers {
		maxOrders = max(maxOrders, len(set))
	}
	paid, duplicated, unreceipted := 0, []string{}, 0
	var behind []string
	for _, o := range orders {
		if o.Status == models.OrderPaid {
			paid++
			if o.Receipts > 1 {
				duplicated = append(duplicated, fmt.Sprintf("%d", o.Receipts))
			}
			if o.Receipts == 0 {
				unreceipted++
			}
		}
		for _, p := range o.Payments {
			if chargedPayment[p.ID] && p.Status != models.PaymentSucceeded && p.Status != models.PaymentRefunded {
				behind = append(behind, p.Status)
			}
		}
	}

	checks := []lab.Check{
		{Invariant: lab.ChargesPerOrder, Holds: maxCharges <= 1,
			Detail: fmt.Sprintf("at most %d succeeded charge(s) on one order, %d in all (want ≤ 1 per order)", maxCharges, total)},
		{Invariant: lab.OrdersPerKey, Holds: maxOrders <= 1,
			Detail: fmt.Sprintf("at most %d order(s) answered under one key (want ≤ 1)", maxOrders)},
		{Invariant: lab.PaidOrders, Holds: paid <= s.PaidOrders,
			Detail: fmt.Sprintf("%d paid order(s) of %d created (want at most %d)", paid, len(orders), s.PaidOrders)},
		{Invariant: lab.ReceiptsPerPaidOrder, Holds: len(duplicated) == 0,
			Detail: receiptDetail(paid, duplicated)},
		{Invariant: lab.StatusMatchesGateway, Holds: len(behind) == 0,
			Detail: statusDetail(behind)},
		{Invariant: lab.PurchasesComplete, Holds: paid >= s.PaidOrders && unreceipted == 0,
			Detail: fmt.Sprintf("%d paid order(s) (want at least %d), %d of them without a receipt (want 0)", paid, s.PaidOrders, unreceipted)},
	}
	return checks
}

func receiptDetail(paid int, duplicated []string) string {
	if len(duplicated) == 0 {
		return fmt.Sprintf("no paid order (of %d) has more than one receipt", paid)
	}
	return fmt.Sprintf("%d paid order(s) with receipts %s (want at most 1 each)", len(duplicated), strings.Join(duplicated, ", "))
}

func statusDetail(behind []string) string {
	if len(behind) == 0 {
		return "every payment charged at the gateway shows succeeded"
	}
	return fmt.Sprintf("%d payment(s) charged at the gateway show %s (want succeeded)", len(behind), strings.Join(behind, ", "))
}
