package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"checkoutlab/handlers"
	"checkoutlab/handlers/idempotency"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
)

// deskShop is the real router with the payments API, the reconciliation API with its triage
// actions, the order ops views and the reconciliation page, wired as cmd/shop wires them, on a
// seeded database, with a real fake gateway that sends no webhooks.
type deskShop struct {
	srv *httptest.Server
	db  *gorm.DB
	gw  *payments.GatewayClient
}

func MustDeskShop(tb testing.TB, db *gorm.DB) *deskShop {
	tb.Helper()
	modelstest.MustSeed(tb, db)
	reg := prometheus.NewRegistry()
	e := handlers.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	tenants, keys := models.NewTenantStore(db), models.NewIdempotencyStore(db)
	journal, decisions := models.NewJournalStore(db, nil), models.NewDecisionStore(db)
	cards := handlers.NewCardFingerprint([]byte("test shop secret, 32 bytes long!"))
	idem := MustIdempotency(keys, time.Minute, idempotency.NewMetrics(reg), journal)
	gw := MustGatewayClient(tb)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	service := &payments.Service{DB: db, Gateway: gw, Outbox: noOutbox{}, Render: handlers.RenderOperation, Journal: journal, Logger: quiet}
	reconciler := &payments.Reconciler{DB: db, Gateway: gw, Keys: keys, Dismissed: decisions}
	desk := &payments.Triage{DB: db, Reconciler: reconciler, Gateway: gw, Service: service,
		Endpoints: handlers.PaymentEndpoints, Keys: keys, Lease: time.Minute,
		Journal: journal, Logger: quiet, Webhooks: &payments.WebhookProcessor{DB: db, Outbox: noOutbox{}, Journal: journal}}
	api := e.Group("/api/v1", handlers.APIKeyAuth(tenants))
	(&handlers.PaymentsAPI{Ops: service, Idempotency: idem, Cards: cards}).Routes(api)
	(&handlers.ReconciliationAPI{Reconciler: reconciler, Desk: desk, Idempotency: idem}).Routes(api)
	(&handlers.OrdersOpsAPI{Orders: models.NewOrderStore(db), Effects: models.NewSideEffectStore(db), Journal: journal}).Routes(api)
	(&handlers.OpsPages{Mailbox: models.NewSideEffectStore(db), Reconciler: reconciler, Tenants: tenants,
		Desk: desk, Decisions: decisions, Idempotency: idem}).Routes(e)
	srv := httptest.NewServer(e)
	tb.Cleanup(srv.Close)
	return &deskShop{srv: srv, db: db, gw: gw}
}

// answer is one API response, read.
type answer struct {
	status   int
	replayed bool
	raw      string
	body     map[string]any
}

// call sends one API request with the tenant's key and, unless key is "-", an Idempotency-Key.
func (s *deskShop) call(tb testing.TB, method, path, apiKey, key, body string) answer {
	tb.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	if key != "-" {
		req.Header.Set(idempotency.HeaderKey, key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, replayed: res.Header.Get(idempotency.HeaderReplayed) == "true", raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

func (s *deskShop) action(tb testing.TB, apiKey, key, action, orderID, reason string) answer {
	tb.Helper()
	body, _ := json.Marshal(map[string]string{"action": action, "order_id": orderID, "reason": reason})
	return s.call(tb, http.MethodPost, "/api/v1/reconciliation/actions", apiKey, key, string(body))
}

// MustDoubleCharge checks out over the API and then has the gateway take a second charge for
// the order under another key, as a provider without idempotency would.
func (s *deskShop) MustDoubleCharge(tb testing.TB, key string) (orderID, kept, extra string) {
	tb.Helper()
	a := s.call(tb, http.MethodPost, "/api/v1/checkout", "sk_test_acme", key, `{"items":[{"sku":"camp-mug","quantity":2}],`+
		`"email":"`+key+`@example.com","shipping_address":{"name":"Ada","address":"1 Way","city":"London","postal_code":"N1","country":"GB"},`+
		`"card_number":"4242424242424242"}`)
	pay, _ := a.body["payment"].(map[string]any)
	if a.status != http.StatusCreated || pay == nil {
		tb.Fatalf("checkout: got %d %s", a.status, a.raw)
	}
	ctx := context.Background()
	pm, err := s.gw.CreatePaymentMethod(ctx, "4242424242424242")
	if err != nil {
		tb.Fatal(err)
	}
	orderID = pay["order_id"].(string)
	second := s.gw.Charge(ctx, payments.ChargeRequest{Amount: 2800, Currency: "USD", PaymentMethod: pm.ID, IdempotencyKey: key + "-again",
		Metadata: map[string]string{"tenant": "acme", "order_id": orderID, "payment_id": pay["id"].(string)}})
	if second.Charge == nil {
		tb.Fatalf("second charge: %s %v", second.Outcome, second.Err)
	}
	return orderID, pay["gateway_charge_id"].(string), second.Charge.ID
}

// refunds counts the order's refunded charges in the gateway's ledger.
func (s *deskShop) refunds(tb testing.TB, orderID string) int {
	tb.Helper()
	charges, err := s.gw.Ledger(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, c := range charges {
		if c.Metadata["order_id"] == orderID && c.Status == "refunded" {
			n++
		}
	}
	return n
}

// TestTriageActionsAPI: POST /api/v1/reconciliation/actions needs an Idempotency-Key like every
// POST; bad input gets a clear 4xx with nothing done; a refund is done once, its answer replayed
// under its key, its decision in the order's events; the finding leaves the report.
func TestTriageActionsAPI(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		s := MustDeskShop(t, db)
		orderID, kept, extra := s.MustDoubleCharge(t, "api-double")
		for name, c := range map[string]struct {
			apiKey, key, body string
			status            int
			code              string
		}{
			"NoKey":         {"sk_test_acme", "-", `{"action":"refund_extra_charge","order_id":"` + orderID + `","reason":"x"}`, 400, "idempotency_key_required"},
			"NotJSON":       {"sk_test_acme", "bad-1", `refund please`, 400, "invalid_json"},
			"UnknownAction": {"sk_test_acme", "bad-2", `{"action":"refund_all","order_id":"` + orderID + `","reason":"x"}`, 400, "invalid_request"},
			"NoReason":      {"sk_test_acme", "bad-3", `{"action":"refund_extra_charge","order_id":"` + orderID + `"}`, 400, "invalid_request"},
			"UnknownOrder":  {"sk_test_acme", "bad-4", `{"action":"refund_extra_charge","order_id":"ord_nope","reason":"x"}`, 404, "not_found"},
			"OtherTenant":   {"sk_test_globex", "bad-5", `{"action":"refund_extra_charge","order_id":"` + orderID + `","reason":"x"}`, 404, "not_found"},
			"NotAllowed":    {"sk_test_acme", "bad-6", `{"action":"dismiss_duplicate","order_id":"` + orderID + `","reason":"x"}`, 409, "action_not_allowed"},
			"NoAPIKey":      {"sk_nope", "bad-7", `{"action":"refund_extra_charge","order_id":"` + orderID + `","reason":"x"}`, 401, "unauthorized"},
		} {
			t.Run(name, func(t *testing.T) {
				a := s.call(t, http.MethodPost, "/api/v1/reconciliation/actions", c.apiKey, c.key, c.body)
				if a.status != c.status || a.body["error"] != c.code {
					t.Errorf("got %d %s, want %d %s", a.status, a.raw, c.status, c.code)
				}
			})
		}
		if got := s.refunds(t, orderID); got != 0 {
			t.Fatalf("after bad input: got %d refunds, want 0", got)
		}

		first := s.action(t, "sk_test_acme", "refund-1", "refund_extra_charge", orderID, "customer charged twice")
		if first.status != http.StatusOK || first.body["result"] != "refunded" || first.body["action"] != "refund_extra_charge" ||
			first.body["order_id"] != orderID || first.body["decision_id"] == "" || !strings.Contains(first.raw, extra) {
			t.Fatalf("refund: got %d %s, want 200 refunded of %s", first.status, first.raw, extra)
		}
		again := s.action(t, "sk_test_acme", "refund-1", "refund_extra_charge", orderID, "customer charged twice")
		if again.status != first.status || again.raw != first.raw || !again.replayed {
			t.Errorf("same key again: got %d %s (replayed %v), want the first answer replayed", again.status, again.raw, again.replayed)
		}
		later := s.action(t, "sk_test_acme", "refund-2", "refund_extra_charge", orderID, "clicked again")
		if later.status != http.StatusConflict || later.body["error"] != "action_not_allowed" {
			t.Errorf("a new key, after the refund: got %d %s, want 409 action_not_allowed", later.status, later.raw)
		}
		if got := s.refunds(t, orderID); got != 1 {
			t.Errorf("ledger: got %d refunds, want 1 (the order keeps %s)", got, kept)
		}

		events := s.call(t, http.MethodGet, "/api/v1/orders/"+orderID+"/events", "sk_test_acme", "-", "")
		var journal struct{ Data []handlers.JournalEventJSON }
		_ = json.Unmarshal([]byte(events.raw), &journal)
		found := false
		for _, ev := range journal.Data {
			found = found || ev.Kind == models.JournalDecision && strings.Contains(ev.Detail, "refund_extra_charge by api_key:") &&
				strings.Contains(ev.Detail, "customer charged twice")
		}
		if !found {
			t.Errorf("events: got %s, want the refund's decision with who and the reason", events.raw)
		}
		rep := s.call(t, http.MethodGet, "/api/v1/reconciliation", "sk_test_acme", "-", "")
		for _, list := range []string{"double_charged_orders", "amount_mismatches", "charged_but_not_paid", "suspected_duplicate_purchases"} {
			l, ok := rep.body[list].([]any)
			if !ok || len(l) != 0 {
				t.Errorf("report %s: got %v, want an empty list", list, rep.body[list])
			}
		}
	})
}

// TestTriageRefundConcurrent: the refund of one double charge sent at once under several
// Idempotency-Keys (two operators, two pages) and twice under one key (a double click), over
// real connections, refunds once: the gateway's ledger shows one refund.
func TestTriageRefundConcurrent(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		s := MustDeskShop(t, db)
		orderID, _, _ := s.MustDoubleCharge(t, "concurrent")
		keys := []string{"op-a", "op-b", "op-c", "click", "click"}
		answers := make([]answer, len(keys))
		var wg sync.WaitGroup
		for i, k := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = s.action(t, "sk_test_acme", k, "refund_extra_charge", orderID, "charged twice")
			}()
		}
		wg.Wait()
		refunded := 0
		for i, a := range answers {
			switch {
			case a.status == http.StatusOK && a.body["result"] == "refunded" && !a.replayed:
				refunded++
			case a.status == http.StatusOK, a.status == http.StatusConflict:
				// already refunded, a replay, nothing left to refund, or the key in progress
			default:
				t.Errorf("key %s: got %d %s", keys[i], a.status, a.raw)
			}
		}
		if refunded != 1 {
			t.Errorf("got %d first answers saying refunded, want 1", refunded)
		}
		if got := s.refunds(t, orderID); got != 1 {
			t.Errorf("ledger: got %d refunds, want 1", got)
		}
	})
}

// TestReconciliationPageDesk: the reconciliation page puts action forms (with CSRF and an
// idempotency key each) on its findings; a click on "Refund the extra charge" redirects back to
// the page with the decision listed and marked and the report clean; the same form sent again
// (a double click) changes nothing more; a form without a reason says so, doing nothing.
func TestReconciliationPageDesk(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		s := MustDeskShop(t, db)
		orderID, _, extra := s.MustDoubleCharge(t, "page-double")
		b := MustBrowser(t, s.srv)
		doc := b.MustGet(t, "/reconciliation?tenant=acme", http.StatusOK)
		if got := doc.Find(`[data-testid="reconciliation-check"]`).Length(); got != 9 {
			t.Errorf("got %d checks, want 9", got)
		}
		if clean := doc.Find(`[data-testid="reconciliation-clean"]`).AttrOr("data-clean", ""); clean != "false" {
			t.Errorf("clean: got %q, want false with a double charge", clean)
		}
		form := doc.Find(fmt.Sprintf(`form[data-testid="triage-action"][data-action="refund_extra_charge"][data-order="%s"]`, orderID)).First()
		if form.Length() == 0 {
			t.Fatalf("want a refund form on the double charge of %s", orderID)
		}
		values := formValues(form)
		if values.Get("_csrf") == "" || values.Get("idempotency_key") == "" || values.Get("tenant") != "acme" {
			t.Fatalf("form: got %v, want _csrf, idempotency_key and tenant", values)
		}

		noReason := url.Values{}
		for k, v := range values {
			noReason[k] = v
		}
		noReason.Set("idempotency_key", "no-reason")
		_, page := b.MustPost(t, "/reconciliation/actions", noReason, http.StatusBadRequest)
		if banner := page.Find(`[data-testid="triage-banner"][data-ok="false"]`); !strings.Contains(banner.Text(), "reason") {
			t.Errorf("without a reason: got banner %q, want it to ask for the reason", banner.Text())
		}
		if got := s.refunds(t, orderID); got != 0 {
			t.Fatalf("without a reason: got %d refunds, want 0", got)
		}

		values.Set("reason", "the customer was charged twice")
		resp, _ := b.MustPost(t, "/reconciliation/actions", values, http.StatusSeeOther)
		loc := MustLocation(t, resp)
		if !strings.HasPrefix(loc, "/reconciliation?") || !strings.Contains(loc, "decision=dec_") {
			t.Fatalf("redirect: got %q, want the page with the decision", loc)
		}
		resp, _ = b.MustPost(t, "/reconciliation/actions", values, http.StatusSeeOther) // the double click
		if again := MustLocation(t, resp); again != loc {
			t.Errorf("second click: got %q, want the same decision %q", again, loc)
		}
		if got := s.refunds(t, orderID); got != 1 {
			t.Errorf("ledger: got %d refunds, want 1", got)
		}
		doc = b.MustGet(t, loc, http.StatusOK)
		rows := doc.Find(`[data-testid="triage-decision"]`)
		if rows.Length() != 1 {
			t.Fatalf("decisions: got %d rows, want 1", rows.Length())
		}
		row := rows.First()
		if row.AttrOr("data-result", "") != "refunded" || row.AttrOr("data-marked", "") != "true" || row.AttrOr("data-order", "") != orderID ||
			!strings.Contains(row.Text(), "operator:") || !strings.Contains(row.Text(), "the customer was charged twice") ||
			!strings.Contains(row.Text(), extra) {
			t.Errorf("decision row: got %q, want the refund of %s by an operator, with the reason, marked", text(row), extra)
		}
		if clean := doc.Find(`[data-testid="reconciliation-clean"]`).AttrOr("data-clean", ""); clean != "true" {
			t.Errorf("clean after the refund: got %q, want true", clean)
		}
		if doc.Find(`[data-testid="triage-banner"][data-ok="true"]`).Length() != 1 {
			t.Errorf("want a banner saying the decision is recorded")
		}

		// Without the CSRF token the form does nothing.
		values.Set("_csrf", "forged")
		values.Set("idempotency_key", "forged")
		_, page = b.MustPost(t, "/reconciliation/actions", values, http.StatusBadRequest)
		if !strings.Contains(page.Text(), "the form expired or did not come from this site") {
			t.Errorf("forged form: got %q, want the CSRF refusal", text(page.Find("main")))
		}
		if got := s.refunds(t, orderID); got != 1 {
			t.Errorf("ledger after a forged form: got %d refunds, want 1", got)
		}
	})
}
