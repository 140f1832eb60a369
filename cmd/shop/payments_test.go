package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// TestCheckoutSurvivesEveryFault runs a one-step checkout through every gateway fault and fault
// test card of the fake gateway, with the client retrying under the SAME key as a careful client
// does, against the real shop and the real fake gateway. Whatever the fault, money moves
// exactly once: one succeeded charge in the gateway's ledger, the order paid, one receipt and
// one shipment. Declines move no money and are answered 402, stored and replayed.
func TestCheckoutSurvivesEveryFault(t *testing.T) {
	cases := []struct {
		name     string
		card     string
		faults   []map[string]any
		wantPaid bool
	}{
		{name: "OK", card: "4242424242424242", wantPaid: true},
		{name: "CardCommitThenDrop", card: "4000000000000119", wantPaid: true},
		{name: "CardCommitThenDelay", card: "4000000000000259", wantPaid: true},
		{name: "CardErrorBeforeCommit", card: "4000000000000341", wantPaid: true},
		{name: "CardWebhookDuplicate", card: "4000000000000770", wantPaid: true},
		{name: "CardWebhookReorder", card: "4000000000000788", wantPaid: true},
		{name: "CardDeclined", card: "4000000000000002"},
		{name: "CardInsufficientFunds", card: "4000000000009995"},
		{name: "Latency", card: "4242424242424242", wantPaid: true, faults: []map[string]any{{"fault": "latency", "delay_ms": 300}}},
		{name: "ErrorBeforeCommit", card: "4242424242424242", wantPaid: true, faults: []map[string]any{{"fault": "error_before_commit"}}},
		{name: "TimeoutBeforeCommit", card: "4242424242424242", wantPaid: true, faults: []map[string]any{{"fault": "timeout_before_commit", "delay_ms": 1500}}},
		{name: "CommitThenDrop", card: "4242424242424242", wantPaid: true, faults: []map[string]any{{"fault": "commit_then_drop"}}},
		{name: "CommitThenDelay", card: "4242424242424242", wantPaid: true, faults: []map[string]any{{"fault": "commit_then_delay", "delay_ms": 1500}}},
		{name: "CommitThenError", card: "4242424242424242", wantPaid: true, faults: []map[string]any{{"fault": "commit_then_error"}}},
		{name: "Decline", card: "4242424242424242", faults: []map[string]any{{"fault": "decline", "code": "expired_card"}}},
		// The gateway refuses the request for good (a 4xx before any work): nothing is
		// charged, the payment fails rather than staying pending forever.
		{name: "RejectedBeforeCommit", card: "4242424242424242", faults: []map[string]any{{"fault": "error_before_commit", "status": 400}}},
		{name: "WebhookDuplicate", card: "4242424242424242", wantPaid: true, faults: []map[string]any{{"fault": "webhook_duplicate", "copies": 4}}},
		{name: "WebhookReorder", card: "4242424242424242", wantPaid: true, faults: []map[string]any{{"fault": "webhook_reorder"}}},
		{name: "WebhookDelay", card: "4242424242424242", wantPaid: true, faults: []map[string]any{{"fault": "webhook_delay", "delay_ms": 1500}}},
		{name: "WebhookFail", card: "4242424242424242", wantPaid: true, faults: []map[string]any{{"fault": "webhook_fail", "times": 2}}},
		// A provider that ignores idempotency keys, and loses the answer: only asking the
		// gateway before charging again keeps this to one charge.
		{name: "IgnoreKeyAndDrop", card: "4242424242424242", wantPaid: true, faults: []map[string]any{
			{"fault": "ignore_idempotency_key"}, {"fault": "commit_then_drop"}}},
	}
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			st := MustStartShop(t, dialect, fastEnv)
			db := st.DB
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					for _, f := range tc.faults {
						armFault(t, st.Gateway, f)
					}
					key := "fault-" + tc.name
					a, attempts := retryUntilFinal(t, st.Shop, "/api/v1/checkout", key, checkoutBody(tc.card), 30)
					t.Logf("%d attempts, final %d", attempts, a.Status)
					orderID := a.OrderID()
					if orderID == "" {
						t.Fatalf("got %d %s, want an answer naming the order", a.Status, a.Raw)
					}
					if tc.wantPaid {
						if a.Status != http.StatusCreated {
							t.Fatalf("got %d %s after %d attempts, want 201", a.Status, a.Raw, attempts)
						}
						eventually(t, 10*time.Second, "one receipt and one shipment", func() bool {
							r, s := effectsOf(t, db, orderID)
							return r == 1 && s == 1
						})
					} else if a.Status != http.StatusPaymentRequired || a.Body["error"] != "card_declined" {
						t.Fatalf("got %d %s, want 402 card_declined", a.Status, a.Raw)
					}
					wantCharges := map[bool]int{true: 1, false: 0}[tc.wantPaid]
					if got := succeededCharges(t, st.Gateway, orderID); got != wantCharges {
						t.Errorf("succeeded charges for %s: got %d, want %d", orderID, got, wantCharges)
					}
					// The same key again replays the stored answer byte for byte.
					again := post(st.Shop, "/api/v1/checkout", key, checkoutBody(tc.card))
					if !again.Replayed || again.Status != a.Status || string(again.Raw) != string(a.Raw) {
						t.Errorf("retry after the final answer: got %d replayed=%v, want the same %d replayed", again.Status, again.Replayed, a.Status)
					}
				})
			}
			// Let late webhooks and duplicate deliveries land, then check the whole tenant.
			time.Sleep(2 * time.Second)
			var ordersCount int64
			db.Model(&models.Order{}).Where("tenant_id = ?", "acme").Count(&ordersCount)
			rep := mustReconciliation(t, st.Shop)
			if rep["orders"] != float64(ordersCount) {
				t.Errorf("reconciliation counts %v orders, the database %d", rep["orders"], ordersCount)
			}
			for _, list := range []string{"double_charged_orders", "charges_without_order", "paid_orders_without_charge", "duplicate_side_effects",
				"unresolved_payments", "stale_operations", "amount_mismatches", "charged_but_not_paid", "webhook_conflicts"} {
				if l, _ := rep[list].([]any); len(l) != 0 {
					t.Errorf("reconciliation %s: got %v, want empty", list, l)
				}
			}
			// The pages a trainer shows, as an operator: one receipt per paid order in the
			// mailbox, and every invariant OK in the reconciliation view.
			operator := operatorClient(t, st)
			mailbox := mustPage(t, operator, st.Shop+"/mailbox?tenant=acme")
			receipts := mailbox.Find(`[data-testid="mail-message"]`)
			if got := receipts.Length(); float64(got) != rep["paid_orders"] {
				t.Errorf("mailbox: got %d receipts, want one per paid order (%v)", got, rep["paid_orders"])
			}
			// A receipt's link opens its order's page for anyone, here a client with no session;
			// the bare order URL opens for nobody but the session that placed the order.
			receipt := receipts.First()
			link := receipt.Find(`a[href*="/orders/"]`).AttrOr("href", "")
			orderID, _, _ := strings.Cut(strings.TrimPrefix(link, "/orders/"), "?")
			if !strings.Contains(receipt.Find("pre").Text(), "Your order: "+st.Shop+link) {
				t.Errorf("receipt: got %q, want it to carry its order's link %s", receipt.Find("pre").Text(), st.Shop+link)
			}
			if page := mustPage(t, http.DefaultClient, st.Shop+link); page.Find(`[data-testid="order-id"]`).Text() != orderID {
				t.Errorf("the receipt's link %s: got order %q, want %s", link, page.Find(`[data-testid="order-id"]`).Text(), orderID)
			}
			res, err := http.Get(st.Shop + "/orders/" + orderID)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusNotFound {
				t.Errorf("/orders/%s without its link or session: got %d, want 404", orderID, res.StatusCode)
			}
			checks := mustPage(t, operator, st.Shop+"/reconciliation?tenant=acme").Find(`[data-testid="reconciliation-check"] .status`)
			if checks.Length() != 9 || checks.Text() != "OKOKOKOKOKOKOKOKOK" {
				t.Errorf("reconciliation page: got %d checks reading %q, want 9 OK", checks.Length(), checks.Text())
			}
		})
	}
}

func mustReconciliation(tb testing.TB, base string) map[string]any {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/reconciliation", nil)
	req.Header.Set("Authorization", "Bearer sk_test_acme")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	var rep map[string]any
	if err := json.NewDecoder(res.Body).Decode(&rep); err != nil || res.StatusCode != http.StatusOK {
		tb.Fatalf("reconciliation: %d %v", res.StatusCode, err)
	}
	return rep
}

// TestWebhookOnly: the client sends one checkout, loses the answer and never comes back. The
// gateway's webhook alone marks the order paid, exactly once, and the completer finishes the
// operation, so a much later retry with the key replays a 201.
func TestWebhookOnly(t *testing.T) {
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			st := MustStartShop(t, dialect, fastEnv)
			db := st.DB
			a := post(st.Shop, "/api/v1/checkout", "gone", checkoutBody("4000000000000119"))
			if a.Status != http.StatusBadGateway || a.Body["error"] != "payment_outcome_unknown" {
				t.Fatalf("first answer: got %d %s, want 502 payment_outcome_unknown", a.Status, a.Raw)
			}
			keys := models.NewIdempotencyStore(db)
			var orderID string
			eventually(t, 15*time.Second, "the completer to finish the operation", func() bool {
				r, err := keys.Get(context.Background(), "acme", "gone")
				if err != nil || r.OrderID == nil {
					return false
				}
				orderID = *r.OrderID
				return r.State == models.KeyCompleted
			})
			o, err := models.NewOrderStore(db).Get(context.Background(), "acme", orderID)
			if err != nil || o.Status != models.OrderPaid {
				t.Fatalf("order: got %v (%v), want paid", o, err)
			}
			if got := succeededCharges(t, st.Gateway, orderID); got != 1 {
				t.Errorf("succeeded charges: got %d, want 1", got)
			}
			later := post(st.Shop, "/api/v1/checkout", "gone", checkoutBody("4000000000000119"))
			if later.Status != http.StatusCreated || !later.Replayed {
				t.Errorf("later retry: got %d replayed=%v, want a replayed 201", later.Status, later.Replayed)
			}
		})
	}
}
