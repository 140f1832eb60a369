package main

// How the lab judges a run: only through what the shop and the gateway show over HTTP — the
// gateway's ledger (where money moved), the shop's orders with their payments, receipts and
// shipments (GET /api/v1/orders), and each order's journal (GET /api/v1/orders/{id}/events).
// These are the views an operator has, so the same judge works for a lab stack and for a shop
// that was already running.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"checkoutlab/models"
	"checkoutlab/payments/lab"
)

// labOrder is an order as GET /api/v1/orders shows it, as much as the invariants need.
type labOrder struct {
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

// labCharge is a gateway ledger entry, as much as the invariants need.
type labCharge struct {
	ID       string            `json:"id"`
	Status   string            `json:"status"`
	Metadata map[string]string `json:"metadata"`
}

// settle waits, at most st.settleWithin, until background work is done: the gateway has no
// webhook delivery left to make (of those made since the run began), no payment of the run is
// still waiting for someone (a retry, the completer) to find out what the gateway did, and
// every paid order has its receipt. Then it waits a little longer for stragglers (duplicates).
// It returns what was still going on if it stopped waiting first, or "".
func (st *labStack) settle(ctx context.Context, since time.Time, email string) string {
	deadline := time.Now().Add(st.settleWithin)
	var unsettled []string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		unsettled = unsettled[:0]
		var d struct {
			Deliveries []struct {
				Status  string    `json:"status"`
				Created time.Time `json:"created_at"`
			} `json:"deliveries"`
		}
		if err := getJSON(ctx, st.http, st.gateway+"/_control/deliveries", "", &d); err != nil {
			unsettled = append(unsettled, "the gateway's deliveries cannot be read: "+err.Error())
		}
		for _, x := range d.Deliveries {
			if x.Status == "pending" && !x.Created.Before(since) {
				unsettled = append(unsettled, "a webhook delivery is pending")
			}
		}
		orders, err := st.ordersSince(ctx, since, email)
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
	return fmt.Sprintf("after %s: %s", st.settleWithin, strings.Join(slices.Compact(unsettled), "; "))
}

// ordersSince lists the run's orders: every tenant's orders created since the run began for
// the run's customer, email.
func (st *labStack) ordersSince(ctx context.Context, since time.Time, email string) ([]labOrder, error) {
	var all []labOrder
	for _, tenant := range slices.Sorted(maps.Keys(st.apiKeys)) {
		var page struct{ Data []labOrder }
		q := url.Values{"created_after": {since.UTC().Format(time.RFC3339Nano)}, "limit": {"500"}}
		if err := getJSON(ctx, st.http, st.shop+"/api/v1/orders?"+q.Encode(), st.apiKeys[tenant], &page); err != nil {
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
func (st *labStack) evaluate(ctx context.Context, s lab.Scenario, since time.Time, client *labClient) ([]lab.Check, []lab.Row, error) {
	var ledger struct{ Charges []labCharge }
	if err := getJSON(ctx, st.http, st.gateway+"/_control/ledger", "", &ledger); err != nil {
		return nil, nil, fmt.Errorf("read the gateway ledger: %w", err)
	}
	orders, err := st.ordersSince(ctx, since, client.email())
	if err != nil {
		return nil, nil, err
	}

	checks := checksOf(s, orders, ledger.Charges, client.answerSets())
	repair, err := st.repairChecks(ctx, s, orders, ledger.Charges)
	if err != nil {
		return nil, nil, err
	}
	checks = append(checks, repair...)

	rows := client.rows()
	seen := map[string]bool{} // orders sharing a key share that key's events: show each once
	for _, o := range orders {
		var events struct{ Data []lab.Row }
		if err := getJSON(ctx, st.http, st.shop+"/api/v1/orders/"+o.ID+"/events", st.apiKeys[o.tenant], &events); err != nil {
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
func checksOf(s lab.Scenario, orders []labOrder, charges []labCharge, answers map[string]map[string]bool) []lab.Check {
	moneyMoved := func(c labCharge) bool { return c.Status == "succeeded" || c.Status == "refunded" }
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

// getJSON GETs url (with apiKey as its Bearer token, if set) and decodes a 200 answer into v.
func getJSON(ctx context.Context, client *http.Client, url, apiKey string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", url, res.StatusCode)
	}
	return json.NewDecoder(res.Body).Decode(v)
}
