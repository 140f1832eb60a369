package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"checkoutlab/cmd/shop/internal/labrun"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// TestPaymentsAPI: paying an order with POST /api/v1/payments, and the bad input around it.
func TestPaymentsAPI(t *testing.T) {
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			st := MustStartShop(t, dialect, fastEnv)
			orderBody, _ := json.Marshal(map[string]any{
				"items": []map[string]any{{"sku": "headlamp", "quantity": 1}}, "email": "ada@example.com",
				"shipping_address": map[string]string{"name": "Ada", "address": "1 Way", "city": "London", "postal_code": "N1", "country": "GB"},
			})
			order := post(st.Shop, "/api/v1/orders", "order-1", orderBody)
			if order.Status != http.StatusCreated {
				t.Fatalf("create order: got %d %s", order.Status, order.Raw)
			}
			id := order.Body["id"].(string)
			pay := func(card string, amount int64) []byte {
				b, _ := json.Marshal(map[string]any{"order_id": id, "amount": amount, "currency": "USD", "card_number": card})
				return b
			}

			t.Run("ErrInvalidJSON", func(t *testing.T) {
				a := post(st.Shop, "/api/v1/payments", "bad-json", []byte(`{"order_id":`))
				if a.Status != http.StatusBadRequest || a.Body["error"] != "invalid_json" {
					t.Errorf("got %d %s, want 400 invalid_json", a.Status, a.Raw)
				}
			})
			t.Run("ErrAmountMismatch", func(t *testing.T) {
				a := post(st.Shop, "/api/v1/payments", "mismatch", pay("4242424242424242", 1))
				if a.Status != http.StatusBadRequest || a.Body["error"] != "amount_mismatch" {
					t.Errorf("got %d %s, want 400 amount_mismatch", a.Status, a.Raw)
				}
				// Not stored: the same key with the right amount is a fresh request.
				// (Checked below by "DeclinedThenAnotherCard", which reuses no key.)
			})
			t.Run("ErrUnknownOrder", func(t *testing.T) {
				b, _ := json.Marshal(map[string]any{"order_id": "ord_nope", "amount": 3900, "currency": "USD", "card_number": "4242424242424242"})
				if a := post(st.Shop, "/api/v1/payments", "unknown-order", b); a.Status != http.StatusNotFound {
					t.Errorf("got %d %s, want 404", a.Status, a.Raw)
				}
			})
			t.Run("ErrBadCard", func(t *testing.T) {
				a := post(st.Shop, "/api/v1/payments", "bad-card", pay("1234", 3900))
				if a.Status != http.StatusBadRequest || a.Body["error"] != "invalid_request" {
					t.Errorf("got %d %s, want 400 invalid_request", a.Status, a.Raw)
				}
			})
			t.Run("DeclinedThenAnotherCard", func(t *testing.T) {
				a := post(st.Shop, "/api/v1/payments", "pay-1", pay("4000000000000002", 3900))
				if a.Status != http.StatusPaymentRequired || a.Body["decline_code"] != "card_declined" {
					t.Fatalf("got %d %s, want 402 card_declined", a.Status, a.Raw)
				}
				a = post(st.Shop, "/api/v1/payments", "pay-2", pay("4242424242424242", 3900))
				if a.Status != http.StatusCreated || a.Body["status"] != "succeeded" {
					t.Fatalf("got %d %s, want 201 succeeded", a.Status, a.Raw)
				}
				if got := succeededCharges(t, st.Gateway, id); got != 1 {
					t.Errorf("succeeded charges: got %d, want 1", got)
				}
			})
			t.Run("ErrOrderAlreadyPaid", func(t *testing.T) {
				a := post(st.Shop, "/api/v1/payments", "pay-3", pay("4242424242424242", 3900))
				if a.Status != http.StatusConflict || a.Body["error"] != "order_already_paid" {
					t.Fatalf("got %d %s, want 409 order_already_paid", a.Status, a.Raw)
				}
				again := post(st.Shop, "/api/v1/payments", "pay-3", pay("4242424242424242", 3900))
				if !again.Replayed || string(again.Raw) != string(a.Raw) {
					t.Errorf("got %d replayed=%v, want the stored 409 replayed", again.Status, again.Replayed)
				}
			})
			t.Run("ErrUnknownProductNotStored", func(t *testing.T) {
				bad := bytes.Replace(checkoutBody("4242424242424242"), []byte("camp-mug"), []byte("no-such-sku"), 1)
				if a := post(st.Shop, "/api/v1/checkout", "fix-me", bad); a.Status != http.StatusNotFound || a.Body["error"] != "unknown_product" {
					t.Fatalf("got %d %s, want 404 unknown_product", a.Status, a.Raw)
				}
				if a := post(st.Shop, "/api/v1/checkout", "fix-me", checkoutBody("4242424242424242")); a.Status != http.StatusCreated {
					t.Errorf("corrected request under the same key: got %d %s, want 201", a.Status, a.Raw)
				}
			})
			t.Run("ErrMissingKey", func(t *testing.T) {
				if a := post(st.Shop, "/api/v1/checkout", "", checkoutBody("4242424242424242")); a.Status != http.StatusBadRequest || a.Body["error"] != "idempotency_key_required" {
					t.Errorf("got %d %s, want 400 idempotency_key_required", a.Status, a.Raw)
				}
			})
			t.Run("ErrSameKeyOtherCard", func(t *testing.T) {
				post(st.Shop, "/api/v1/checkout", "card-swap", checkoutBody("4242424242424242"))
				if a := post(st.Shop, "/api/v1/checkout", "card-swap", checkoutBody("5555555555554444")); a.Status != http.StatusUnprocessableEntity {
					t.Errorf("got %d %s, want 422 idempotency_key_reuse", a.Status, a.Raw)
				}
			})
			t.Run("NoCardNumberAtRest", func(t *testing.T) {
				// Every table the shop writes, read as text: no card number the tests used
				// may appear anywhere — not in keys, payments, events or queued jobs.
				db := st.DB
				cards := []string{"4242424242424242", "5555555555554444", "4000000000000002", "4000000000000119"}
				rowsSeen := 0
				for _, table := range []string{"idempotency_keys", "payments", "orders", "webhook_events", "mailbox_messages", "river_job"} {
					var rows []map[string]any
					if err := db.Table(table).Find(&rows).Error; err != nil {
						t.Fatalf("read %s: %v", table, err)
					}
					rowsSeen += len(rows)
					for _, r := range rows {
						text := fmt.Sprint(r)
						for k, v := range r {
							if b, ok := v.([]byte); ok {
								text += " " + k + "=" + string(b)
							}
						}
						for _, card := range cards {
							if strings.Contains(text, card) {
								t.Errorf("%s stores card number %s: %s", table, card, text)
							}
						}
					}
				}
				if rowsSeen < 10 {
					t.Errorf("read %d rows in all, want the rows the subtests above wrote", rowsSeen)
				}
			})
		})
	}
}

// TestWebhookEndpoint: forged, stale and malformed webhooks are refused with no effect; an
// authentic one is applied once, and its redelivery is a 2xx no-op.
func TestWebhookEndpoint(t *testing.T) {
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			st := MustStartShop(t, dialect, fastEnv)
			db := st.DB
			// An order whose payment is pending: the gateway's answer was lost and nobody retries
			// within this test (the webhook sender of the in-process gateway is also live, so use
			// a charge id of our own making).
			order := post(st.Shop, "/api/v1/checkout", "wh", checkoutBody("4000000000000119"))
			if order.Status != http.StatusBadGateway {
				t.Fatalf("setup: got %d %s, want 502", order.Status, order.Raw)
			}
			keys := models.NewIdempotencyStore(db)
			rec, err := keys.Get(context.Background(), "acme", "wh")
			if err != nil || rec.PaymentID == nil {
				t.Fatalf("setup: key %v %v", rec, err)
			}
			body, _ := json.Marshal(map[string]any{"id": "evt_test_1", "type": "charge.succeeded", "created": time.Now().Unix(),
				"data": map[string]any{"charge": map[string]any{"id": "ch_test_1", "status": "succeeded", "amount": 2800, "currency": "USD",
					"metadata": map[string]string{"tenant": "acme", "order_id": *rec.OrderID, "payment_id": *rec.PaymentID}}}})
			send := func(id string, ts time.Time, payload []byte, secret string) int {
				wh, _ := standardwebhooks.NewWebhook(secret)
				sig, _ := wh.Sign(id, ts, payload)
				req, _ := http.NewRequest(http.MethodPost, st.Shop+"/webhooks/gateway", bytes.NewReader(payload))
				req.Header.Set("webhook-id", id)
				req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
				req.Header.Set("webhook-signature", sig)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				return res.StatusCode
			}
			var events int64
			count := func() int64 {
				db.Model(&models.WebhookEvent{}).Where("event_id = ?", "evt_test_1").Count(&events)
				return events
			}

			if got := send("evt_test_1", time.Now(), body, "whsec_"+"c2VjcmV0LW9mLXNvbWVib2R5LWVsc2U="); got != http.StatusUnauthorized {
				t.Errorf("forged signature: got %d, want 401", got)
			}
			if got := send("evt_test_1", time.Now().Add(-10*time.Minute), body, demoWebhookSecret); got != http.StatusBadRequest {
				t.Errorf("stale timestamp: got %d, want 400", got)
			}
			tampered := bytes.Replace(body, []byte("2800"), []byte("1"), 1)
			wh, _ := standardwebhooks.NewWebhook(demoWebhookSecret)
			sig, _ := wh.Sign("evt_test_1", time.Now(), body)
			req, _ := http.NewRequest(http.MethodPost, st.Shop+"/webhooks/gateway", bytes.NewReader(tampered))
			req.Header.Set("webhook-id", "evt_test_1")
			req.Header.Set("webhook-timestamp", strconv.FormatInt(time.Now().Unix(), 10))
			req.Header.Set("webhook-signature", sig)
			if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusUnauthorized {
				t.Errorf("tampered body: got %v %v, want 401", res, err)
			}
			if res, err := http.Post(st.Shop+"/webhooks/gateway", "application/json", bytes.NewReader(body)); err != nil || res.StatusCode != http.StatusBadRequest {
				t.Errorf("no signature headers: got %v %v, want 400", res, err)
			}
			if n := count(); n != 0 {
				t.Fatalf("refused webhooks left %d event records, want 0", n)
			}
			for i := 0; i < 3; i++ {
				if got := send("evt_test_1", time.Now(), body, demoWebhookSecret); got != http.StatusOK {
					t.Fatalf("authentic delivery %d: got %d, want 200", i, got)
				}
			}
			if n := count(); n != 1 {
				t.Errorf("got %d records of the event, want 1", n)
			}
			o, _ := models.NewOrderStore(db).Get(context.Background(), "acme", *rec.OrderID)
			if o.Status != models.OrderPaid {
				t.Errorf("order: got %s, want paid", o.Status)
			}
		})
	}
}

// TestConcurrentPaymentsOfOneOrder: many clients pay the same (declined) order at once, each
// under its own key. Exactly one payment succeeds and one charge moves money; every other
// request is refused as order_already_paid or payment_in_progress — never a second charge,
// never a 5xx, on either database.
func TestConcurrentPaymentsOfOneOrder(t *testing.T) {
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			st := MustStartShop(t, dialect, fastEnv)
			for round := 0; round < 5; round++ {
				declined := post(st.Shop, "/api/v1/checkout", fmt.Sprintf("declined-%d", round), checkoutBody("4000000000000002"))
				orderID, _ := declined.Body["order_id"].(string)
				if declined.Status != http.StatusPaymentRequired || orderID == "" {
					t.Fatalf("setup: got %d %s, want a 402 naming the order", declined.Status, declined.Raw)
				}
				body, _ := json.Marshal(map[string]any{"order_id": orderID, "amount": 2800, "currency": "USD", "card_number": "4242424242424242"})
				var wg sync.WaitGroup
				answers := make(chan labrun.Answer, 12)
				for i := 0; i < 12; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						answers <- post(st.Shop, "/api/v1/payments", fmt.Sprintf("pay-%d-%d", round, i), body)
					}()
				}
				wg.Wait()
				close(answers)
				succeeded := 0
				for a := range answers {
					switch {
					case a.Status == http.StatusCreated:
						succeeded++
					case a.Status == http.StatusConflict && (a.Body["error"] == "order_already_paid" || a.Body["error"] == "payment_in_progress"):
					default:
						t.Errorf("got %d %s, want 201 or a 409 refusal", a.Status, a.Raw)
					}
				}
				if succeeded != 1 {
					t.Errorf("round %d: got %d succeeded payments, want 1", round, succeeded)
				}
				if got := succeededCharges(t, st.Gateway, orderID); got != 1 {
					t.Errorf("round %d: got %d succeeded charges, want 1", round, got)
				}
			}
		})
	}
}
