package chaos

// How a chaos run is judged: after the stack has settled, from the run's own evidence — the
// gateway's ledger (where money moved), the shop's orders, payments and receipts (its
// database, which every replica shares), the shop's reconciliation report — with the failure
// lab's invariants (payments/lab).

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"checkoutlab/cmd/shop/internal/labrun"
	"checkoutlab/models"
	"checkoutlab/payments"
	"checkoutlab/payments/lab"
	"checkoutlab/web/components"
)

// settle waits, at most two minutes, until the shop's background work is done: no webhook
// delivery is pending, no payment is still waiting for someone to find out what the gateway
// did, every paid order has its receipt. It returns what was still going on if it stopped
// waiting first, or "".
func (ru *run) settle(ctx context.Context) string {
	db := ru.stack.DB.WithContext(ctx)
	deadline := time.Now().Add(2 * time.Minute)
	var why []string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		why = why[:0]
		var d struct {
			Deliveries []struct {
				Status  string    `json:"status"`
				Created time.Time `json:"created_at"`
			} `json:"deliveries"`
		}
		if err := ru.controlGet(ctx, "/_control/deliveries", &d); err != nil {
			why = append(why, "the gateway's deliveries cannot be read: "+err.Error())
		}
		pending := 0
		for _, x := range d.Deliveries {
			if x.Status == "pending" && !x.Created.Before(ru.began.Add(-time.Second)) {
				pending++
			}
		}
		var unknown, unreceipted int64
		err := db.Raw(`SELECT count(*) FROM payments p JOIN orders o ON o.id = p.order_id
			WHERE o.email LIKE ? AND p.status = ? AND p.gateway_charge_id IS NULL`, ru.emails, models.PaymentPending).Scan(&unknown).Error
		if err == nil {
			err = db.Raw(`SELECT count(*) FROM orders o WHERE o.email LIKE ? AND o.status = ? AND NOT EXISTS
				(SELECT 1 FROM mailbox_messages m WHERE m.order_id = o.id AND m.kind = 'receipt')`, ru.emails, models.OrderPaid).Scan(&unreceipted).Error
		}
		if err != nil {
			why = append(why, "the shop's database cannot be read: "+err.Error())
		}
		if pending > 0 {
			why = append(why, fmt.Sprintf("%d webhook deliveries pending", pending))
		}
		if unknown > 0 {
			why = append(why, fmt.Sprintf("%d payments whose outcome is not yet found out", unknown))
		}
		if unreceipted > 0 {
			why = append(why, fmt.Sprintf("%d paid orders waiting for their receipt", unreceipted))
		}
		if len(why) == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // duplicate jobs and late duplicate webhooks
	if len(why) == 0 {
		return ""
	}
	return strings.Join(why, "; ")
}

// charge is an entry of the gateway's ledger.
type charge struct {
	ID       string            `json:"id"`
	Status   string            `json:"status"`
	Amount   int64             `json:"amount"`
	Currency string            `json:"currency"`
	Created  int64             `json:"created"`
	Metadata map[string]string `json:"metadata"`
}

type orderRow struct {
	ID       string
	TenantID string
	Email    string
	Status   string
}

type paymentRow struct {
	ID      string
	OrderID string
	Status  string
}

// evidence is everything a run is judged from.
type evidence struct {
	charges   []charge
	orders    []orderRow
	payments  []paymentRow
	receipts  map[string]int // order id → receipts
	suspected int
}

func (ru *run) gather(ctx context.Context) (*evidence, error) {
	ev := &evidence{receipts: map[string]int{}}
	var ledger struct{ Charges []charge }
	if err := ru.controlGet(ctx, "/_control/ledger", &ledger); err != nil {
		return nil, fmt.Errorf("read the gateway's ledger: %w", err)
	}
	db := ru.stack.DB.WithContext(ctx)
	if err := db.Raw("SELECT id, tenant_id, email, status FROM orders WHERE email LIKE ?", ru.emails).Scan(&ev.orders).Error; err != nil {
		return nil, fmt.Errorf("read the orders: %w", err)
	}
	if err := db.Raw(`SELECT p.id, p.order_id, p.status FROM payments p JOIN orders o ON o.id = p.order_id
		WHERE o.email LIKE ?`, ru.emails).Scan(&ev.payments).Error; err != nil {
		return nil, fmt.Errorf("read the payments: %w", err)
	}
	ours := map[string]bool{}
	for _, o := range ev.orders {
		ours[o.ID] = true
	}
	// The run's charges: those of its orders, and any other made since it began (a charge no
	// order of the shop knows is money lost too).
	since := ru.began.Add(-time.Second).Unix()
	for _, c := range ledger.Charges {
		if ours[c.Metadata["order_id"]] || c.Created >= since {
			ev.charges = append(ev.charges, c)
		}
	}
	var counts []struct {
		OrderID string
		N       int
	}
	if err := db.Raw(`SELECT m.order_id, count(*) AS n FROM mailbox_messages m JOIN orders o ON o.id = m.order_id
		WHERE o.email LIKE ? AND m.kind = 'receipt' GROUP BY m.order_id`, ru.emails).Scan(&counts).Error; err != nil {
		return nil, fmt.Errorf("read the receipts: %w", err)
	}
	for _, c := range counts {
		ev.receipts[c.OrderID] = c.N
	}
	// The reconciliation report, as an operator reads it, through the load balancer.
	client := &http.Client{Timeout: 60 * time.Second}
	for _, tenant := range slices.Sorted(maps.Keys(ru.stack.APIKeys)) {
		var rep struct {
			Suspected []struct {
				OrderIDs []string `json:"order_ids"`
			} `json:"suspected_duplicate_purchases"`
		}
		if err := labrun.GetJSON(ctx, client, ru.stack.Proxy.URL()+"/api/v1/reconciliation", ru.stack.APIKeys[tenant], &rep); err != nil {
			return nil, fmt.Errorf("read %s's reconciliation: %w", tenant, err)
		}
		for _, s := range rep.Suspected {
			if slices.ContainsFunc(s.OrderIDs, func(id string) bool { return ours[id] }) {
				ev.suspected++
			}
		}
	}
	return ev, nil
}

// judge checks the invariants over the evidence and the customers' outcomes.
func (ru *run) judge(ctx context.Context, outcomes []outcome, events []lab.ChaosEvent) (*lab.ChaosResult, error) {
	ev, err := ru.gather(ctx)
	if err != nil {
		return nil, err
	}
	o := ru.o
	res := &lab.ChaosResult{Seed: o.Seed, Purchases: o.Purchases, Clients: o.Clients, Replicas: o.Replicas, Off: o.Off,
		Database: models.Dialect(ru.stack.DB), Schedule: events, Kills: int(ru.kills.Load()), Faults: int(ru.faults.Load()),
		ProxyRetries: ru.stack.Proxy.Retried()}
	if res.Schedule == nil {
		res.Schedule = []lab.ChaosEvent{}
	}
	purchaseOf := map[string]int{} // e-mail → purchase
	for _, out := range outcomes {
		purchaseOf[out.Email] = out.Index
		switch out.Outcome {
		case lab.ChaosOutcomeGaveUp:
			res.GaveUp++
		case lab.ChaosOutcomeDeclined:
			res.Declined++
			res.Answered++
		default:
			res.Answered++
		}
		res.Points = append(res.Points, lab.ChaosPoint{AtMS: out.Done.Milliseconds(), Outcome: out.Outcome})
	}
	sort.Slice(res.Points, func(i, j int) bool { return res.Points[i].AtMS < res.Points[j].AtMS })
	ru.mu.Lock()
	res.Marks = slices.Clone(ru.marks)
	ru.mu.Unlock()

	orderByID := map[string]orderRow{}
	for _, ord := range ev.orders {
		orderByID[ord.ID] = ord
	}
	worst := map[string]string{} // order id → why
	moved := func(c charge) bool { return c.Status == "succeeded" || c.Status == "refunded" }

	// Double charges, and what they cost: every charge beyond an order's first, oldest first.
	byOrder := map[string][]charge{}
	chargedPayment := map[string]bool{}
	for _, c := range ev.charges {
		if moved(c) {
			byOrder[c.Metadata["order_id"]] = append(byOrder[c.Metadata["order_id"]], c)
			chargedPayment[c.Metadata["payment_id"]] = true
		}
	}
	over := map[string]int64{}
	for id, cs := range byOrder {
		if len(cs) > 1 {
			sort.Slice(cs, func(i, j int) bool { return cs[i].Created < cs[j].Created })
			res.DoubleCharges += len(cs) - 1
			for _, c := range cs[1:] {
				over[c.Currency] += c.Amount
			}
			worst[id] = fmt.Sprintf("charged %d times", len(cs))
		}
		if ord, ok := orderByID[id]; !ok || ord.Status != models.OrderPaid {
			res.Lost++ // charged but not paid
			worst[id] = "charged, but the order is not paid"
		}
	}
	for _, cur := range slices.Sorted(maps.Keys(over)) {
		res.Overcharged = append(res.Overcharged, lab.Money{Amount: over[cur], Currency: cur})
	}
	if res.Overcharged == nil {
		res.Overcharged = []lab.Money{}
	}

	// Orders: one paid order per purchase, each with a charge and one receipt.
	paidPer := map[string][]string{}
	for _, ord := range ev.orders {
		if ord.Status != models.OrderPaid {
			continue
		}
		paidPer[ord.Email] = append(paidPer[ord.Email], ord.ID)
		if len(byOrder[ord.ID]) == 0 {
			res.Lost++ // paid but not charged
			worst[ord.ID] = "paid, but never charged"
		}
		switch n := ev.receipts[ord.ID]; {
		case n > 1:
			res.DuplicateReceipts += n - 1
			worst[ord.ID] = fmt.Sprintf("%d receipts", n)
		}
	}
	for _, ids := range paidPer {
		if len(ids) > 1 {
			res.DuplicateOrders += len(ids) - 1
			for _, id := range ids {
				worst[id] = fmt.Sprintf("one of %d paid orders of one purchase", len(ids))
			}
		}
	}
	maxOrdersPerKey := 0
	for _, out := range outcomes {
		if len(out.Keys) == 1 {
			maxOrdersPerKey = max(maxOrdersPerKey, len(out.Orders))
		}
	}
	for _, p := range ev.payments {
		if chargedPayment[p.ID] && p.Status != models.PaymentSucceeded && p.Status != models.PaymentRefunded {
			res.StatusRegressed++
			worst[p.OrderID] = "charged at the gateway, but the payment shows " + p.Status
		}
	}
	res.SuspectedDuplicates = ev.suspected

	for _, id := range slices.Sorted(maps.Keys(worst)) {
		ord := orderByID[id]
		idx, ok := purchaseOf[ord.Email]
		if !ok {
			idx = -1
		}
		res.Worst = append(res.Worst, lab.ChaosWorst{Purchase: idx, Tenant: ord.TenantID, OrderID: id, Why: worst[id]})
	}
	sort.SliceStable(res.Worst, func(i, j int) bool { return res.Worst[i].Purchase < res.Worst[j].Purchase })
	if len(res.Worst) > 10 {
		res.Worst = res.Worst[:10]
	}
	// Their journals, as an operator reads them, before the stack goes away with its database.
	client := &http.Client{Timeout: 30 * time.Second}
	for i, w := range res.Worst {
		var events struct{ Data []lab.Row }
		if err := labrun.GetJSON(ctx, client, ru.stack.Proxy.URL()+"/api/v1/orders/"+w.OrderID+"/events", ru.stack.APIKeys[w.Tenant], &events); err != nil {
			ru.problem("read the journal of %s: %v", w.OrderID, err)
			continue
		}
		res.Worst[i].Timeline = events.Data
	}

	unreceipted := 0
	for _, ids := range paidPer {
		for _, id := range ids {
			if ev.receipts[id] == 0 {
				unreceipted++
			}
		}
	}
	res.Invariants = []lab.Check{
		{Invariant: lab.ChargesPerOrder, Holds: res.DoubleCharges == 0,
			Detail: fmt.Sprintf("%d charge(s) beyond an order's first (want 0)", res.DoubleCharges)},
		{Invariant: lab.OrdersPerKey, Holds: maxOrdersPerKey <= 1,
			Detail: fmt.Sprintf("at most %d order(s) answered under one key (want ≤ 1)", maxOrdersPerKey)},
		{Invariant: lab.PaidOrders, Holds: res.DuplicateOrders == 0,
			Detail: fmt.Sprintf("%d paid order(s) beyond a purchase's first (want 0)", res.DuplicateOrders)},
		{Invariant: lab.ReceiptsPerPaidOrder, Holds: res.DuplicateReceipts == 0,
			Detail: fmt.Sprintf("%d receipt(s) beyond a paid order's first (want 0)", res.DuplicateReceipts)},
		{Invariant: lab.StatusMatchesGateway, Holds: res.StatusRegressed == 0,
			Detail: fmt.Sprintf("%d payment(s) charged at the gateway show another status (want 0)", res.StatusRegressed)},
		{Invariant: lab.PurchasesComplete, Holds: res.Lost == 0 && unreceipted == 0,
			Detail: fmt.Sprintf("%d lost (charged but not paid, or paid but not charged), %d paid order(s) without a receipt (want 0)", res.Lost, unreceipted)},
	}
	res.Verdict, res.OK = verdict(res)
	return res, nil
}

// harmOf says whether the harm that switch off is about shows in res.
func harmOf(off payments.Switch, res *lab.ChaosResult) bool {
	switch off {
	case payments.SwitchDerivedGatewayKey:
		return res.DoubleCharges > 0
	case payments.SwitchClientSameKey:
		return res.DuplicateOrders > 0 || res.SuspectedDuplicates > 0
	case payments.SwitchServerIdempotency, payments.SwitchAtomicReservation:
		return res.DuplicateOrders > 0 || res.DoubleCharges > 0
	case payments.SwitchWebhookDedupe:
		return res.DuplicateReceipts > 0
	case payments.SwitchMonotonicStatus:
		return res.StatusRegressed > 0
	}
	return false
}

// verdict words what happened and whether it is what the run was for: with every
// protection on, no invariant broken; with one off, its harm shown.
func verdict(res *lab.ChaosResult) (string, bool) {
	var harms []string
	if res.DoubleCharges > 0 {
		var money []string
		for _, m := range res.Overcharged {
			money = append(money, components.Money(m.Amount, m.Currency))
		}
		harms = append(harms, fmt.Sprintf("%d double charge(s), %s overcharged", res.DoubleCharges, strings.Join(money, " + ")))
	}
	if res.DuplicateOrders > 0 {
		harms = append(harms, fmt.Sprintf("%d duplicate order(s)", res.DuplicateOrders))
	}
	if res.Lost > 0 {
		harms = append(harms, fmt.Sprintf("%d lost", res.Lost))
	}
	if res.DuplicateReceipts > 0 {
		harms = append(harms, fmt.Sprintf("%d duplicate receipt(s)", res.DuplicateReceipts))
	}
	if res.StatusRegressed > 0 {
		harms = append(harms, fmt.Sprintf("%d payment status(es) behind the gateway", res.StatusRegressed))
	}
	broken := 0
	for _, c := range res.Invariants {
		if !c.Holds {
			broken++
		}
	}
	if res.Off == "" {
		if broken == 0 {
			return "clean: no double charge, nothing lost, every invariant holds", true
		}
		return "BUG: with every protection on: " + strings.Join(harms, "; "), false
	}
	if harmOf(res.Off, res) {
		what := strings.Join(harms, "; ")
		if what == "" {
			what = fmt.Sprintf("%d suspected duplicate purchase(s) for review", res.SuspectedDuplicates)
		}
		return fmt.Sprintf("reproduced: without %s, %s", res.Off, what), true
	}
	return fmt.Sprintf("NOT reproduced: without %s its harm did not appear (try more purchases or another seed)", res.Off), false
}
