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
		var d struct {
			Deliveries []struct {
				Status  string    `json:"status"`
				Created time.Time `json:"created_at"`
			} `json:"deliveries"`
		}
		if err := getJSON(ctx, t.http, t.gateway+"/_control/deliveries", "", &d); err != nil {
			unsettled = append(unsettled, "the gateway's deliveries cannot be read: "+err.Error())
		}
		for _, x := range d.Deliveries {
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
				// Pending with no charge recorded: the outcome is still to be found out.
				if p.Status == models.PaymentPending && p.GatewayChargeID == nil {
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

// evaluate checks the invariants over the orders created since the run began, and returns
// their journals, with the client's own events, as the timeline.
func (t *target) evaluate(ctx context.Context, s lab.Scenario, since time.Time, c *client) ([]lab.Check, []lab.Row, error) {
	charges, err := Ledger(ctx, t.http, t.gateway)
	if err != nil {
		return nil, nil, err
	}
	orders, err := t.ordersSince(ctx, since, c.email())
	if err != nil {
		return nil, nil, err
	}

	checks := checksOf(s, orders, charges, c.answerSets())
	repair, err := t.repairChecks(ctx, s, orders, charges)
	if err != nil {
		return nil, nil, err
	}
	checks = append(checks, repair...)

	rows := c.rows()
	seen := map[string]bool{} // orders sharing a key share that key's events: show each once
	for _, o := range orders {
		var events struct{ Data []lab.Row }
		if err := getJSON(ctx, t.http, t.shop+"/api/v1/orders/"+o.ID+"/events", t.apiKeys[o.tenant], &events); err != nil {
			return nil, nil, fmt.Errorf("read the journal of %s: %w", o.ID, err)
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
	return checks, rows, nil
}

// checksOf checks the invariants of scenario s over the run's orders, the gateway's charges
// and, per tenant/key, the order ids the client's answers named.
func checksOf(s lab.Scenario, orders []order, charges []Charge, answers map[string]map[string]bool) []lab.Check {
	moneyMoved := func(c Charge) bool { return c.Status == "succeeded" || c.Status == "refunded" }
	chargesOf, chargedPayment := map[string]int{}, map[string]bool{}
	for _, c := range charges {
		if moneyMoved(c) {
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
