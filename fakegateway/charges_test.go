package fakegateway_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"checkoutlab/fakegateway"
)

func TestCharges(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		g := mustGateway(t, dialect)

		t.Run("OK", func(t *testing.T) {
			r := g.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(1999, cardOK, "ord_ok"), key("k-ok"))
			if r.Status != http.StatusCreated {
				t.Fatalf("got %d %s, want 201", r.Status, r.Body)
			}
			var ch fakegateway.Charge
			r.decode(t, &ch)
			if ch.Status != "succeeded" || ch.Amount != 1999 || ch.Currency != "EUR" || ch.IdempotencyKey != "k-ok" ||
				ch.Metadata["order_id"] != "ord_ok" || ch.Created == 0 || ch.PaymentMethod == "" || ch.FailureCode != "" {
				t.Errorf("got %+v", ch)
			}
			var got fakegateway.Charge
			g.mustDo(t, http.MethodGet, "/v1/charges/"+ch.ID, nil, nil).decode(t, &got)
			if got.ID != ch.ID || got.Status != "succeeded" {
				t.Errorf("GET got %+v, want %s succeeded", got, ch.ID)
			}
		})
		t.Run("Replay", func(t *testing.T) {
			first := g.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(500, cardOK, "ord_replay"), key("k-replay"))
			second := g.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(500, cardOK, "ord_replay"), key("k-replay"))
			var a, b fakegateway.Charge
			first.decode(t, &a)
			second.decode(t, &b)
			if second.Status != first.Status || a.ID != b.ID {
				t.Errorf("got %d %s, want %d %s", second.Status, b.ID, first.Status, a.ID)
			}
			if second.Header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("replay lacks Idempotent-Replayed: true")
			}
			var list fakegateway.ChargeList
			g.mustDo(t, http.MethodGet, "/v1/charges?idempotency_key=k-replay", nil, nil).decode(t, &list)
			if len(list.Data) != 1 || list.Data[0].ID != a.ID {
				t.Errorf("lookup by key: got %+v, want [%s]", list.Data, a.ID)
			}
		})
		t.Run("ReplayDecline", func(t *testing.T) {
			first := g.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(500, cardDeclined, "ord_d"), key("k-decline"))
			second := g.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(500, cardDeclined, "ord_d"), key("k-decline"))
			if first.Status != http.StatusPaymentRequired || second.Status != http.StatusPaymentRequired {
				t.Errorf("got %d then %d, want 402 twice", first.Status, second.Status)
			}
		})
		t.Run("ErrIdempotencyKeyReuse", func(t *testing.T) {
			g.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(700, cardOK, "ord_r"), key("k-reuse"))
			before := len(g.ledger(t))
			for name, body := range map[string]map[string]any{
				"amount":   chargeBody(701, cardOK, "ord_r"),
				"currency": {"amount": 700, "currency": "USD", "card_number": cardOK},
				"card":     chargeBody(700, "5555555555554444", "ord_r"),
			} {
				r := g.mustDo(t, http.MethodPost, "/v1/charges", body, key("k-reuse"))
				if r.Status != http.StatusConflict || r.errorCode(t) != "idempotency_key_reuse" {
					t.Errorf("%s: got %d %s, want 409 idempotency_key_reuse", name, r.Status, r.Body)
				}
			}
			// Metadata is not a significant parameter: same key, same money, same card.
			r := g.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(700, cardOK, "ord_other"), key("k-reuse"))
			if r.Status != http.StatusCreated {
				t.Errorf("metadata change: got %d, want 201 replay", r.Status)
			}
			if after := len(g.ledger(t)); after != before {
				t.Errorf("ledger: got %d charges, want %d", after, before)
			}
		})
		t.Run("ConcurrentSameKey", func(t *testing.T) {
			const n = 20
			var wg sync.WaitGroup
			ids := make([]string, n)
			statuses := make([]int, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := g.do(http.MethodPost, "/v1/charges", chargeBody(4200, cardOK, "ord_race"), key("k-race"), waitFor)
					if err != nil {
						t.Errorf("request %d: %v", i, err)
						return
					}
					var ch fakegateway.Charge
					r.decode(t, &ch)
					ids[i], statuses[i] = ch.ID, r.Status
				}()
			}
			wg.Wait()
			for i := range n {
				if statuses[i] != http.StatusCreated || ids[i] != ids[0] {
					t.Errorf("request %d: got %d %s, want 201 %s", i, statuses[i], ids[i], ids[0])
				}
			}
			var list fakegateway.ChargeList
			g.mustDo(t, http.MethodGet, "/v1/charges?idempotency_key=k-race", nil, nil).decode(t, &list)
			if len(list.Data) != 1 {
				t.Errorf("got %d charges under the key, want 1", len(list.Data))
			}
		})
		t.Run("Refund", func(t *testing.T) {
			var ch fakegateway.Charge
			g.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(900, cardOK, "ord_ref"), key("k-refund")).decode(t, &ch)
			r := g.mustDo(t, http.MethodPost, "/v1/charges/"+ch.ID+"/refunds", "{}", nil)
			var got fakegateway.Charge
			r.decode(t, &got)
			if r.Status != http.StatusOK || got.Status != "refunded" || !got.Refunded {
				t.Errorf("got %d %+v, want 200 refunded", r.Status, got)
			}
			again := g.mustDo(t, http.MethodPost, "/v1/charges/"+ch.ID+"/refunds", "{}", nil)
			if again.Status != http.StatusBadRequest || again.errorCode(t) != "charge_already_refunded" {
				t.Errorf("second refund: got %d %s, want 400 charge_already_refunded", again.Status, again.Body)
			}
			var failed fakegateway.Charge
			g.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(900, cardDeclined, "ord_ref2"), key("k-refund-2")).decode(t, &failed)
			if r := g.mustDo(t, http.MethodPost, "/v1/charges/"+failed.ID+"/refunds", "{}", nil); r.Status != http.StatusBadRequest {
				t.Errorf("refund of a failed charge: got %d, want 400", r.Status)
			}
			if r := g.mustDo(t, http.MethodPost, "/v1/charges/ch_nope/refunds", "{}", nil); r.Status != http.StatusNotFound {
				t.Errorf("refund of an unknown charge: got %d, want 404", r.Status)
			}
		})
		t.Run("ErrNotFound", func(t *testing.T) {
			r := g.mustDo(t, http.MethodGet, "/v1/charges/ch_missing", nil, nil)
			if r.Status != http.StatusNotFound || r.errorCode(t) != "resource_missing" {
				t.Errorf("got %d %s, want 404 resource_missing", r.Status, r.Body)
			}
		})
	})
}

func TestPaymentMethodsAndTestCards(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		g := mustGateway(t, dialect)
		newPM := func(t *testing.T, number string) fakegateway.PaymentMethod {
			t.Helper()
			r := g.mustDo(t, http.MethodPost, "/v1/payment_methods", map[string]string{"card_number": number}, nil)
			if r.Status != http.StatusCreated {
				t.Fatalf("got %d %s, want 201", r.Status, r.Body)
			}
			var pm fakegateway.PaymentMethod
			r.decode(t, &pm)
			return pm
		}
		t.Run("OK", func(t *testing.T) {
			pm := newPM(t, "4242 4242 4242 4242")
			if pm.Last4 != "4242" || pm.Brand != "visa" || len(pm.ID) < 4 || pm.ID[:3] != "pm_" {
				t.Errorf("got %+v", pm)
			}
			if mc := newPM(t, "5555555555554444"); mc.Brand != "mastercard" {
				t.Errorf("brand: got %q, want mastercard", mc.Brand)
			}
		})
		t.Run("ErrInvalidCard", func(t *testing.T) {
			for _, number := range []string{"4242424242424241", "1234", "4242-abcd-4242-4242", ""} {
				r := g.mustDo(t, http.MethodPost, "/v1/payment_methods", map[string]string{"card_number": number}, nil)
				if r.Status != http.StatusBadRequest || r.errorCode(t) != "invalid_card_number" {
					t.Errorf("%q: got %d %s, want 400 invalid_card_number", number, r.Status, r.Body)
				}
			}
		})
		// Each test card's behaviour travels with its payment method.
		cases := []struct {
			card, status, failure string
			code                  int
		}{
			{cardOK, "succeeded", "", 201},
			{cardDeclined, "failed", "card_declined", 402},
			{cardInsufficient, "failed", "insufficient_funds", 402},
			{cardDuplicate, "succeeded", "", 201},
			{cardReorder, "succeeded", "", 201},
		}
		for _, tc := range cases {
			t.Run("Card"+tc.card[12:], func(t *testing.T) {
				pm := newPM(t, tc.card)
				body := map[string]any{"amount": 1000, "currency": "usd", "payment_method": pm.ID}
				r := g.mustDo(t, http.MethodPost, "/v1/charges", body, key("pm-"+tc.card))
				var ch fakegateway.Charge
				r.decode(t, &ch)
				if r.Status != tc.code || ch.Status != tc.status || ch.FailureCode != tc.failure || ch.PaymentMethod != pm.ID {
					t.Errorf("got %d %s %q pm %s, want %d %s %q pm %s", r.Status, ch.Status, ch.FailureCode,
						ch.PaymentMethod, tc.code, tc.status, tc.failure, pm.ID)
				}
			})
		}
	})
}

func TestBadInput(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		g := mustGateway(t, dialect)
		ok := chargeBody(1000, cardOK, "ord_bad")
		with := func(k string, v any) map[string]any {
			m := map[string]any{}
			for kk, vv := range ok {
				m[kk] = vv
			}
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
			return m
		}
		cases := []struct {
			name   string
			body   any
			header map[string]string
			code   string
		}{
			{"NoIdempotencyKey", ok, nil, "idempotency_key_required"},
			{"EmptyIdempotencyKey", ok, key(" "), "invalid_idempotency_key"},
			{"LongIdempotencyKey", ok, key(strings.Repeat("k", 256)), "invalid_idempotency_key"},
			{"MalformedJSON", `{"amount": 10,`, key("b1"), "invalid_request"},
			{"NotAnObject", `[1,2]`, key("b2"), "invalid_request"},
			{"EmptyBody", ``, key("b3"), "invalid_request"},
			{"UnknownField", with("colour", "red"), key("b4"), "invalid_request"},
			{"MissingAmount", with("amount", nil), key("b5"), "invalid_request"},
			{"ZeroAmount", with("amount", 0), key("b6"), "invalid_request"},
			{"NegativeAmount", with("amount", -5), key("b7"), "invalid_request"},
			{"FractionalAmount", with("amount", 10.5), key("b8"), "invalid_request"},
			{"StringAmount", with("amount", "10"), key("b9"), "invalid_request"},
			{"HugeAmount", with("amount", 100_000_000), key("b10"), "invalid_request"},
			{"MissingCurrency", with("currency", nil), key("b11"), "invalid_request"},
			{"UnknownCurrency", with("currency", "XYZ"), key("b12"), "invalid_request"},
			{"NoPaymentSource", with("card_number", nil), key("b13"), "invalid_request"},
			{"BadCard", with("card_number", "4242424242424241"), key("b14"), "invalid_card_number"},
			{"BothSources", with("payment_method", "pm_x"), key("b15"), "invalid_request"},
			{"UnknownPaymentMethod", map[string]any{"amount": 10, "currency": "EUR", "payment_method": "pm_nope"}, key("b16"), "resource_missing"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := g.mustDo(t, http.MethodPost, "/v1/charges", tc.body, tc.header)
				if r.Status != http.StatusBadRequest || r.errorCode(t) != tc.code {
					t.Errorf("got %d %s, want 400 %s", r.Status, r.Body, tc.code)
				}
			})
		}
		t.Run("BadFaults", func(t *testing.T) {
			for name, body := range map[string]any{
				"UnknownFault":       map[string]any{"fault": "meteor_strike"},
				"UnknownParameter":   map[string]any{"fault": "latency", "colour": "red"},
				"ParameterNotForIt":  map[string]any{"fault": "latency", "copies": 2},
				"ZeroTimes":          map[string]any{"fault": "latency", "times": 0},
				"ZeroProbability":    map[string]any{"fault": "latency", "probability": 0},
				"BigProbability":     map[string]any{"fault": "latency", "probability": 1.5},
				"NegativeDelay":      map[string]any{"fault": "latency", "delay_ms": -1},
				"Status402":          map[string]any{"fault": "error_before_commit", "status": 402},
				"Status200":          map[string]any{"fault": "error_before_commit", "status": 200},
				"AfterCommit503":     map[string]any{"fault": "commit_then_error", "status": 503},
				"AfterCommit4xx":     map[string]any{"fault": "commit_then_error", "status": 400},
				"UnknownDeclineCode": map[string]any{"fault": "decline", "code": "bad_luck"},
				"TooManyCopies":      map[string]any{"fault": "webhook_duplicate", "copies": 21},
				"Malformed":          `{"fault":`,
			} {
				r := g.mustDo(t, http.MethodPost, "/_control/faults", body, nil)
				if r.Status != http.StatusBadRequest {
					t.Errorf("%s: got %d %s, want 400", name, r.Status, r.Body)
				}
			}
			var faults fakegateway.FaultList
			g.mustDo(t, http.MethodGet, "/_control/faults", nil, nil).decode(t, &faults)
			if len(faults.Faults) != 0 {
				t.Errorf("got %d armed faults after bad requests, want 0", len(faults.Faults))
			}
		})
		t.Run("LedgerUnchanged", func(t *testing.T) {
			if got := g.ledger(t); len(got) != 0 {
				t.Errorf("ledger: got %d charges after bad input, want 0", len(got))
			}
			if got := g.deliveries(t); len(got) != 0 {
				t.Errorf("deliveries: got %d after bad input, want 0", len(got))
			}
		})
	})
}
