package payments_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
)

// triageStack is the triage desk wired as cmd/shop wires it, on a seeded database, with a real
// fake gateway (on a database of the same dialect) that sends no webhooks: every change comes
// from the code under test.
type triageStack struct {
	db      *gorm.DB
	srv     *httptest.Server
	gw      *payments.GatewayClient
	keys    *models.IdempotencyStore
	journal *models.JournalStore
	service *payments.Service
	proc    *payments.WebhookProcessor
	rec     *payments.Reconciler
	desk    *payments.Triage
}

// renderOutcome is a minimal renderer: 201 for an outcome, 402 for a decline.
func renderOutcome(out payments.Result) (models.Response, error) {
	status := http.StatusCreated
	if out.Err != nil {
		status = http.StatusPaymentRequired
	}
	body, err := json.Marshal(map[string]string{"order_id": out.Order.ID, "payment": out.Payment.Status})
	return models.Response{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}, err
}

func mustTriageStack(t *testing.T, db *gorm.DB) *triageStack {
	t.Helper()
	modelstest.MustSeed(t, db)
	st := &triageStack{db: db, srv: mustFakeGateway(t, models.Dialect(db)), keys: models.NewIdempotencyStore(db),
		journal: models.NewJournalStore(db, nil)}
	st.gw = payments.NewGatewayClient(st.srv.URL, 5*time.Second)
	st.gw.ControlToken = testControlToken
	outbox := &countingOutbox{}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st.service = &payments.Service{DB: db, Gateway: st.gw, Outbox: outbox, Render: renderOutcome, Journal: st.journal, Logger: quiet}
	st.proc = &payments.WebhookProcessor{DB: db, Outbox: outbox, Journal: st.journal}
	// No grace: whatever is pending now counts as unresolved, so the tests need not wait.
	st.rec = &payments.Reconciler{DB: db, Gateway: st.gw, Keys: st.keys, Dismissed: models.NewDecisionStore(db)}
	st.desk = &payments.Triage{DB: db, Reconciler: st.rec, Gateway: st.gw, Webhooks: st.proc, Service: st.service,
		Endpoints: map[string]payments.Operation{"POST /api/v1/checkout": payments.OperationCheckout}, Keys: st.keys, Lease: time.Minute, Journal: st.journal, Logger: quiet}
	return st
}

// checkout runs one checkout under key as the idempotency middleware would: reserve (or take
// over) the key, run the operation, release the key after an error. It returns the answer (or
// the error) and the order the key is linked to.
func (st *triageStack) checkout(t *testing.T, tenant, key, card, email string, items ...models.Item) (models.Response, string, error) {
	t.Helper()
	ctx := context.Background()
	res, err := st.keys.Reserve(ctx, models.ReserveRequest{TenantID: tenant, Key: key, Principal: "api_key:test",
		Endpoint: "POST /api/v1/checkout", Fingerprint: strings.Repeat("0", 64), Params: []byte("{}"), Lease: time.Minute})
	if err != nil || res.Outcome != models.Reserved {
		t.Fatalf("reserve %s: got %+v %v, want reserved", key, res, err)
	}
	if len(items) == 0 {
		items = []models.Item{{SKU: "camp-mug", Quantity: 2}}
	}
	resp, err := st.service.Checkout(ctx, res.Key, payments.CheckoutRequest{CardNumber: card,
		Order: models.NewOrder{TenantID: tenant, Email: email, Items: items,
			Shipping: models.Address{Name: "Ada", Address: "1 Way", City: "London", PostalCode: "N1", Country: "GB"}}})
	if err != nil {
		if rerr := res.Key.Release(ctx); rerr != nil {
			t.Fatal(rerr)
		}
	}
	rec, gerr := st.keys.Get(ctx, tenant, key)
	if gerr != nil || rec.OrderID == nil {
		t.Fatalf("key %s: got %+v %v, want one linked to an order", key, rec, gerr)
	}
	return resp, *rec.OrderID, err
}

// uncharged checks out with the gateway answering 503 before it charges: the operation is
// left at payment_created with its key released and a pending payment, nothing charged, as a
// client that never came back leaves it. It returns the order.
func (st *triageStack) uncharged(t *testing.T, tenant, key, card, email string, items ...models.Item) string {
	t.Helper()
	mustArm(t, st.srv, map[string]any{"fault": "error_before_commit"})
	_, orderID, err := st.checkout(t, tenant, key, card, email, items...)
	mustCode(t, err, "gateway_unavailable")
	return orderID
}

// plant makes a charge at the gateway as someone other than the shop could: under key, with
// the payment's metadata, for amount.
func (st *triageStack) plant(t *testing.T, pay *models.Payment, key, card string, amount int64) payments.GatewayCharge {
	t.Helper()
	ctx := context.Background()
	pm, err := st.gw.CreatePaymentMethod(ctx, card)
	if err != nil {
		t.Fatal(err)
	}
	r := st.gw.Charge(ctx, payments.ChargeRequest{Amount: amount, Currency: pay.Currency, PaymentMethod: pm.ID, IdempotencyKey: key,
		Metadata: map[string]string{"tenant": pay.TenantID, "order_id": pay.OrderID, "payment_id": pay.ID}})
	if r.Charge == nil {
		t.Fatalf("plant a charge: got %s %v", r.Outcome, r.Err)
	}
	return *r.Charge
}

func (st *triageStack) order(t *testing.T, tenant, id string) *models.Order {
	t.Helper()
	o, err := models.NewOrderStore(st.db).Get(context.Background(), tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (st *triageStack) report(t *testing.T, tenant string) *payments.Report {
	t.Helper()
	rep, err := st.rec.Report(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func (st *triageStack) act(tenant, orderID, action, outcome string) (*payments.ActionResult, error) {
	return st.desk.Act(context.Background(), payments.ActionRequest{TenantID: tenant, OrderID: orderID, Action: action,
		Outcome: outcome, Reason: "seen on the desk", Who: "api_key:test"})
}

// ledgerStatuses counts the gateway's charges of an order by status.
func (st *triageStack) ledgerStatuses(t *testing.T, orderID string) map[string]int {
	t.Helper()
	charges, err := st.gw.Ledger(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, c := range charges {
		if c.Metadata["order_id"] == orderID {
			out[c.Status]++
		}
	}
	return out
}

func mustCode(t *testing.T, err error, want string) {
	t.Helper()
	var e *models.Error
	if !errors.As(err, &e) || e.Code != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func mustJournalHas(t *testing.T, st *triageStack, orderID, kind, contains string) {
	t.Helper()
	evs, err := st.journal.ForOrder(context.Background(), orderID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Kind == kind && strings.Contains(ev.Detail, contains) {
			return
		}
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Kind+": "+ev.Detail)
	}
	t.Fatalf("journal of %s: want a %s event containing %q, got\n%s", orderID, kind, contains, strings.Join(got, "\n"))
}

const (
	cardOK         = "4242424242424242"
	cardDeclined   = "4000000000000002"
	cardCommitDrop = "4000000000000119"
)

// TestAmountMismatch: a charge applies to a payment only if its amount and currency are the
// payment's, on the webhook path and on the lookup of a resumed operation alike. A 1-cent
// charge with the shop's metadata does not pay a €129 order; a charge (succeeded or declined)
// planted under the shop's derived key is not the outcome of the customer's retry, which must
// not answer 402; reconciliation lists every such charge.
func TestAmountMismatch(t *testing.T) {
	grinder := models.Item{SKU: "burr-grinder", Quantity: 1} // €129.00
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		st := mustTriageStack(t, db)
		t.Run("OneCentByWebhook", func(t *testing.T) {
			orderID := st.uncharged(t, "globex", "cent-hook", cardOK, "ada@example.com", grinder)
			pay := currentPayment(t, st, "globex", orderID)
			cent := st.plant(t, pay, "attacker-1", cardOK, 1)
			ev := payments.GatewayEvent{ID: "evt_cent", Type: "charge.succeeded"}
			ev.Data.Charge = cent
			decision, _, err := st.proc.Process(context.Background(), ev)
			if err != nil || decision != models.DecisionNoChange {
				t.Fatalf("process: got %q %v, want no_change", decision, err)
			}
			if o := st.order(t, "globex", orderID); o.Status != models.OrderPendingPayment || o.Payments[0].Status != models.PaymentPending {
				t.Errorf("got order %s, payment %s; want pending_payment, pending", o.Status, o.Payments[0].Status)
			}
			mustJournalHas(t, st, orderID, models.JournalWebhook, "amount_mismatch: charge "+cent.ID)
			rep := st.report(t, "globex")
			if !hasMismatch(rep, cent.ID, 1, 12900) {
				t.Errorf("amount_mismatches: got %+v, want charge %s of 1 against 12900", rep.AmountMismatches, cent.ID)
			}
			if !hasCharge(rep.ChargedButNotPaid, cent.ID) {
				t.Errorf("charged_but_not_paid: got %+v, want %s", rep.ChargedButNotPaid, cent.ID)
			}
		})
		t.Run("OneCentUnderTheKey", func(t *testing.T) {
			orderID := st.uncharged(t, "globex", "cent-key", cardOK, "bob@example.com", grinder)
			pay := currentPayment(t, st, "globex", orderID)
			cent := st.plant(t, pay, pay.GatewayKey, cardOK, 1)
			resp, _, err := st.checkout(t, "globex", "cent-key", cardOK, "bob@example.com", grinder)
			mustCode(t, err, "payment_outcome_unknown")
			if resp.Status != 0 {
				t.Errorf("retry: got answer %d, want none (the key is released)", resp.Status)
			}
			if o := st.order(t, "globex", orderID); o.Status != models.OrderPendingPayment {
				t.Errorf("order: got %s, want pending_payment", o.Status)
			}
			mustJournalHas(t, st, orderID, models.JournalGatewayLookup, "amount_mismatch: charge "+cent.ID)
			if rep := st.report(t, "globex"); !hasMismatch(rep, cent.ID, 1, 12900) {
				t.Errorf("amount_mismatches: got %+v, want %s", rep.AmountMismatches, cent.ID)
			}
		})
		t.Run("PlantedDecline", func(t *testing.T) {
			orderID := st.uncharged(t, "globex", "planted", cardOK, "cy@example.com", grinder)
			pay := currentPayment(t, st, "globex", orderID)
			declined := st.plant(t, pay, pay.GatewayKey, cardDeclined, 100)
			resp, _, err := st.checkout(t, "globex", "planted", cardOK, "cy@example.com", grinder)
			if resp.Status == http.StatusPaymentRequired {
				t.Fatalf("retry: got 402, want no decline: the planted charge is not this payment's outcome")
			}
			mustCode(t, err, "payment_outcome_unknown")
			if p := currentPayment(t, st, "globex", orderID); p.Status != models.PaymentPending {
				t.Errorf("payment: got %s, want pending", p.Status)
			}
			if rep := st.report(t, "globex"); !hasMismatch(rep, declined.ID, 100, 12900) {
				t.Errorf("amount_mismatches: got %+v, want the declined %s while the payment is pending", rep.AmountMismatches, declined.ID)
			}
			// The desk can settle it: nothing that could be this payment's outcome is at the
			// gateway, and no money was taken.
			if _, err := st.act("globex", orderID, "settle_stuck", payments.SettleFailed); err != nil {
				t.Fatalf("settle as failed: %v", err)
			}
			if rep := st.report(t, "globex"); hasMismatch(rep, declined.ID, 100, 12900) {
				t.Errorf("amount_mismatches: got %+v, want the declined charge gone once its payment is settled", rep.AmountMismatches)
			}
		})
	})
}

func currentPayment(t *testing.T, st *triageStack, tenant, orderID string) *models.Payment {
	t.Helper()
	o := st.order(t, tenant, orderID)
	if len(o.Payments) == 0 {
		t.Fatalf("order %s has no payment", orderID)
	}
	return &o.Payments[len(o.Payments)-1]
}

func hasMismatch(rep *payments.Report, chargeID string, chargeAmount, amount int64) bool {
	for _, m := range rep.AmountMismatches {
		if m.ChargeID == chargeID && m.ChargeAmount == chargeAmount && m.Amount == amount {
			return true
		}
	}
	return false
}

func hasCharge(list []payments.ChargeOfOrder, chargeID string) bool {
	for _, c := range list {
		if c.ChargeID == chargeID {
			return true
		}
	}
	return false
}

// doubleCharged checks out one order normally and then has the gateway take a second charge
// for it under another key, as a provider without idempotency (or a shop that made a key per
// attempt) would. It returns the order, the charge the order keeps and the extra one.
func doubleCharged(t *testing.T, st *triageStack, key string) (orderID, kept, extra string) {
	t.Helper()
	resp, orderID, err := st.checkout(t, "acme", key, cardOK, key+"@example.com")
	if err != nil || resp.Status != http.StatusCreated {
		t.Fatalf("checkout: got %d %v", resp.Status, err)
	}
	pay := currentPayment(t, st, "acme", orderID)
	second := st.plant(t, pay, key+"-second-attempt", cardOK, pay.Amount)
	return orderID, *pay.GatewayChargeID, second.ID
}

// TestTriageActions: each action on each finding it applies to, and its refusal (409
// action_not_allowed, nothing done) on the others; every decision in the decisions list and the
// order's journal; a resolved finding leaves the report.
func TestTriageActions(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		st := mustTriageStack(t, db)
		decisions := models.NewDecisionStore(db)
		refused := func(t *testing.T, orderID, action, outcome string) {
			t.Helper()
			before, _ := decisions.List(context.Background(), "acme", 1000)
			_, err := st.act("acme", orderID, action, outcome)
			mustCode(t, err, "action_not_allowed")
			if after, _ := decisions.List(context.Background(), "acme", 1000); len(after) != len(before) {
				t.Errorf("%s refused: got %d decisions, want %d (nothing recorded)", action, len(after), len(before))
			}
		}

		t.Run("DoubleCharge", func(t *testing.T) {
			orderID, kept, extra := doubleCharged(t, st, "double")
			if f := st.report(t, "acme").FindingsOf(orderID); !contains(f, payments.FindingDoubleCharged) {
				t.Fatalf("findings: got %v, want double_charged_orders", f)
			}
			refused(t, orderID, "settle_stuck", "")
			refused(t, orderID, "dismiss_duplicate", "")
			res, err := st.act("acme", orderID, "check_now", "")
			if err != nil || res.Result != payments.ResultNoChange {
				t.Fatalf("check_now: got %+v %v, want no_change", res, err)
			}
			res, err = st.act("acme", orderID, "refund_extra_charge", "")
			if err != nil || res.Result != payments.ResultRefunded || !strings.Contains(res.Detail, extra) || res.DecisionID == "" {
				t.Fatalf("refund: got %+v %v, want %s refunded", res, err, extra)
			}
			if got := st.ledgerStatuses(t, orderID); got["succeeded"] != 1 || got["refunded"] != 1 {
				t.Errorf("ledger: got %v, want one succeeded (%s), one refunded", got, kept)
			}
			if o := st.order(t, "acme", orderID); o.Status != models.OrderPaid || *o.Payments[0].GatewayChargeID != kept {
				t.Errorf("order: got %s keeping %s, want paid keeping %s", o.Status, *o.Payments[0].GatewayChargeID, kept)
			}
			if f := st.report(t, "acme").FindingsOf(orderID); len(f) != 0 {
				t.Errorf("findings after the refund: got %v, want none", f)
			}
			refused(t, orderID, "refund_extra_charge", "") // the second click, later: nothing left to refund
			mustJournalHas(t, st, orderID, models.JournalDecision, "refund_extra_charge by api_key:test: refunded")
			mustJournalHas(t, st, orderID, models.JournalDecision, `Reason: "seen on the desk"`)
			ds, _ := decisions.List(context.Background(), "acme", 10)
			if len(ds) == 0 || ds[0].ID != res.DecisionID || ds[0].Findings != payments.FindingDoubleCharged ||
				!strings.Contains(ds[0].Gateway, extra+" succeeded") || ds[0].Who != "api_key:test" {
				t.Errorf("decisions: got %+v, want the refund first, with its finding, who and what the gateway showed", ds)
			}
		})

		t.Run("StuckWithACharge", func(t *testing.T) {
			_, orderID, err := st.checkout(t, "acme", "stuck-charged", cardCommitDrop, "stuck@example.com")
			mustCode(t, err, "payment_outcome_unknown")
			f := st.report(t, "acme").FindingsOf(orderID)
			for _, want := range []string{payments.FindingUnresolvedPayment, payments.FindingStaleOperation, payments.FindingChargedButNotPaid} {
				if !contains(f, want) {
					t.Fatalf("findings: got %v, want %s", f, want)
				}
			}
			refused(t, orderID, "settle_stuck", payments.SettleFailed) // the gateway shows a charge
			refused(t, orderID, "refund_extra_charge", "")             // the charge is the pending payment's own
			refused(t, orderID, "dismiss_duplicate", "")
			res, err := st.act("acme", orderID, "settle_stuck", "")
			if err != nil || res.Result != payments.ResultResumed {
				t.Fatalf("settle_stuck resume: got %+v %v, want resumed", res, err)
			}
			if o := st.order(t, "acme", orderID); o.Status != models.OrderPaid {
				t.Errorf("order: got %s, want paid", o.Status)
			}
			if rec, _ := st.keys.Get(context.Background(), "acme", "stuck-charged"); rec.State != models.KeyCompleted || *rec.ResponseStatus != http.StatusCreated {
				t.Errorf("key: got %s %v, want completed with 201 for the client's retry", rec.State, rec.ResponseStatus)
			}
			if got := st.ledgerStatuses(t, orderID); got["succeeded"] != 1 {
				t.Errorf("ledger: got %v, want the one charge, not a second", got)
			}
			if f := st.report(t, "acme").FindingsOf(orderID); len(f) != 0 {
				t.Errorf("findings after settling: got %v, want none", f)
			}
			mustJournalHas(t, st, orderID, models.JournalDecision, "settle_stuck by api_key:test: resumed")
		})

		t.Run("StuckWithoutACharge", func(t *testing.T) {
			stockOf := func() int {
				p, err := models.NewProductStore(db).BySKU(context.Background(), "acme", "camp-mug")
				if err != nil {
					t.Fatal(err)
				}
				return p.Stock
			}
			before := stockOf()
			orderID := st.uncharged(t, "acme", "stuck-nothing", cardOK, "nothing@example.com")
			refused(t, orderID, "refund_extra_charge", "")
			refused(t, orderID, "dismiss_duplicate", "")
			res, err := st.act("acme", orderID, "check_now", "")
			if err != nil || res.Result != payments.ResultNothingToApply {
				t.Fatalf("check_now: got %+v %v, want nothing_to_apply", res, err)
			}
			res, err = st.act("acme", orderID, "settle_stuck", payments.SettleFailed)
			if err != nil || res.Result != payments.ResultFailed {
				t.Fatalf("settle_stuck failed: got %+v %v, want marked_failed", res, err)
			}
			o := st.order(t, "acme", orderID)
			// The order ends as the hold would end it: expired, its stock back on the shelf, so
			// no later payment can pay for stock it no longer holds.
			if o.Status != models.OrderExpired || o.Payments[0].Status != models.PaymentFailed {
				t.Errorf("got order %s, payment %s; want expired, failed", o.Status, o.Payments[0].Status)
			}
			if got := stockOf(); got != before {
				t.Errorf("stock: got %d, want %d (given back)", got, before)
			}
			if rec, _ := st.keys.Get(context.Background(), "acme", "stuck-nothing"); rec.State != models.KeyCompleted || *rec.ResponseStatus != http.StatusPaymentRequired {
				t.Errorf("key: got %s %v, want completed with the decline", rec.State, rec.ResponseStatus)
			}
			refused(t, orderID, "settle_stuck", payments.SettleFailed) // settled: the finding is gone
			if got := stockOf(); got != before {
				t.Errorf("stock after a second try: got %d, want %d (given back once)", got, before)
			}
			mustJournalHas(t, st, orderID, models.JournalDecision, "settle_stuck by api_key:test: marked_failed")
		})

		t.Run("SuspectedDuplicate", func(t *testing.T) {
			var orders []string
			for _, key := range []string{"dup-1", "dup-2"} {
				resp, orderID, err := st.checkout(t, "acme", key, cardOK, "Twice@Example.com")
				if err != nil || resp.Status != http.StatusCreated {
					t.Fatalf("checkout %s: got %d %v", key, resp.Status, err)
				}
				orders = append(orders, orderID)
			}
			rep := st.report(t, "acme")
			if len(rep.SuspectedDuplicatePurchases) != 1 || strings.Join(rep.SuspectedDuplicatePurchases[0].OrderIDs, ",") != strings.Join(orders, ",") {
				t.Fatalf("suspected duplicates: got %+v, want %v", rep.SuspectedDuplicatePurchases, orders)
			}
			refused(t, orders[1], "check_now", "")
			refused(t, orders[1], "refund_extra_charge", "")
			refused(t, orders[1], "settle_stuck", "")
			res, err := st.act("acme", orders[1], "dismiss_duplicate", "")
			if err != nil || res.Result != models.ResultDismissed {
				t.Fatalf("dismiss: got %+v %v", res, err)
			}
			if rep := st.report(t, "acme"); len(rep.SuspectedDuplicatePurchases) != 0 {
				t.Errorf("suspected duplicates after dismissing: got %+v, want none", rep.SuspectedDuplicatePurchases)
			}
			mustJournalHas(t, st, orders[1], models.JournalDecision, "dismiss_duplicate by api_key:test: dismissed")
		})

		t.Run("OneCentCharge", func(t *testing.T) {
			orderID := st.uncharged(t, "acme", "cent", cardOK, "cent@example.com")
			cent := st.plant(t, currentPayment(t, st, "acme", orderID), "cent-attacker", cardOK, 1)
			res, err := st.act("acme", orderID, "refund_extra_charge", "")
			if err != nil || res.Result != payments.ResultRefunded || !strings.Contains(res.Detail, cent.ID) {
				t.Fatalf("refund: got %+v %v, want the 1-cent charge refunded", res, err)
			}
			if rep := st.report(t, "acme"); hasMismatch(rep, cent.ID, 1, 2800) || hasCharge(rep.ChargedButNotPaid, cent.ID) {
				t.Errorf("report: got %+v / %+v, want the refunded charge gone", rep.AmountMismatches, rep.ChargedButNotPaid)
			}
		})

		t.Run("BadInput", func(t *testing.T) {
			orderID, _, _ := doubleCharged(t, st, "bad-input")
			before, _ := decisions.List(context.Background(), "acme", 1000)
			for name, c := range map[string]struct {
				req  payments.ActionRequest
				code string
			}{
				"UnknownAction":    {payments.ActionRequest{TenantID: "acme", OrderID: orderID, Action: "refund_everything", Reason: "x"}, "invalid_request"},
				"NoReason":         {payments.ActionRequest{TenantID: "acme", OrderID: orderID, Action: "refund_extra_charge", Reason: "  "}, "invalid_request"},
				"NULInReason":      {payments.ActionRequest{TenantID: "acme", OrderID: orderID, Action: "refund_extra_charge", Reason: "a\x00b"}, "invalid_request"},
				"OutcomeElsewhere": {payments.ActionRequest{TenantID: "acme", OrderID: orderID, Action: "refund_extra_charge", Outcome: "failed", Reason: "x"}, "invalid_request"},
				"UnknownOrder":     {payments.ActionRequest{TenantID: "acme", OrderID: "ord_nope", Action: "refund_extra_charge", Reason: "x"}, "not_found"},
				"OtherTenant":      {payments.ActionRequest{TenantID: "globex", OrderID: orderID, Action: "refund_extra_charge", Reason: "x"}, "not_found"},
			} {
				t.Run(name, func(t *testing.T) {
					_, err := st.desk.Act(context.Background(), c.req)
					mustCode(t, err, c.code)
				})
			}
			if after, _ := decisions.List(context.Background(), "acme", 1000); len(after) != len(before) {
				t.Errorf("got %d decisions, want %d: bad input does nothing", len(after), len(before))
			}
			if got := st.ledgerStatuses(t, orderID); got["refunded"] != 0 {
				t.Errorf("ledger: got %v, want nothing refunded", got)
			}
		})
	})
}

// TestRefundClickedTwice: the refund of a double charge, asked for at once by several clicks
// (real goroutines, each its own request), refunds once: the gateway's ledger shows one refund
// and the order keeps its charge. Every answer is the refund, the refund seen as done, or a
// refusal because nothing is left to refund.
func TestRefundClickedTwice(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		st := mustTriageStack(t, db)
		orderID, kept, _ := doubleCharged(t, st, "twice")
		const clicks = 4
		var wg sync.WaitGroup
		results := make([]string, clicks)
		for i := range clicks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := st.act("acme", orderID, "refund_extra_charge", "")
				switch {
				case err == nil:
					results[i] = res.Result
				default:
					results[i] = models.ErrorOf(err).Code
				}
			}()
		}
		wg.Wait()
		refunded := 0
		for _, r := range results {
			switch r {
			case payments.ResultRefunded:
				refunded++
			case payments.ResultAlreadyRefunded, "action_not_allowed":
			default:
				t.Errorf("got answer %q, want refunded, already_refunded or action_not_allowed", r)
			}
		}
		if refunded != 1 {
			t.Errorf("got %d answers refunded (%v), want exactly 1", refunded, results)
		}
		if got := st.ledgerStatuses(t, orderID); got["succeeded"] != 1 || got["refunded"] != 1 {
			t.Errorf("ledger: got %v, want one refund and the kept charge %s still succeeded", got, kept)
		}
	})
}

// TestWebhookConflict: a second delivery under a processed webhook-id with another payload
// changes nothing, is journaled as a conflict and listed by reconciliation; a plain
// redelivery is only a duplicate.
func TestWebhookConflict(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		st := mustTriageStack(t, db)
		pay := MustPendingPayment(t, db)
		ev := event(pay, "charge.succeeded", "ch_conflict")
		for range 2 {
			if _, _, err := st.proc.Process(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
		}
		if rep := st.report(t, "acme"); len(rep.WebhookConflicts) != 0 {
			t.Fatalf("after a plain redelivery: got conflicts %+v, want none", rep.WebhookConflicts)
		}
		changed := ev
		changed.Type = "charge.refunded"
		changed.Data.Charge.Status = "refunded"
		_, duplicate, err := st.proc.Process(context.Background(), changed)
		if err != nil || !duplicate {
			t.Fatalf("changed payload: got duplicate=%v %v, want a duplicate that changes nothing", duplicate, err)
		}
		if p, _ := mustState(t, db, pay); p != models.PaymentSucceeded {
			t.Errorf("payment: got %s, want succeeded (the changed payload applies nothing)", p)
		}
		mustJournalHas(t, st, pay.OrderID, models.JournalWebhook, "conflict: another payload under an already-processed webhook-id")
		rep := st.report(t, "acme")
		if len(rep.WebhookConflicts) != 1 || rep.WebhookConflicts[0].EventID != ev.ID || rep.WebhookConflicts[0].OrderID != pay.OrderID {
			t.Errorf("webhook_conflicts: got %+v, want %s of order %s", rep.WebhookConflicts, ev.ID, pay.OrderID)
		}
		if rep.Clean() {
			t.Errorf("Clean: got true, want false with a webhook conflict")
		}
	})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
