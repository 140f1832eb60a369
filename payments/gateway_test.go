package payments_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"checkoutlab/fakegateway"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
)

// clientTimeout is the shop-side timeout in these tests; the hanging faults hang far longer.
const clientTimeout = 300 * time.Millisecond

// testControlToken guards the control API of the tests' gateways, as GATEWAY_CONTROL_TOKEN
// guards a real one: a client that forgets to send it fails here too.
const testControlToken = "gwctl_payments_test_token"

// mustFakeGateway starts the real fake gateway on a fresh database of dialect, its control
// API guarded by testControlToken.
func mustFakeGateway(t *testing.T, dialect string) *httptest.Server {
	t.Helper()
	url := modelstest.MustDatabaseURL(t, dialect)
	dir := ""
	if url == "" {
		dir = t.TempDir()
	}
	db, err := fakegateway.OpenDB(context.Background(), url, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { models.Close(db) })
	gw, err := fakegateway.New(fakegateway.Config{DB: db, ControlToken: testControlToken,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(func() {
		_ = gw.Close()
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv
}

func mustArm(t *testing.T, srv *httptest.Server, fault map[string]any) {
	t.Helper()
	body, _ := json.Marshal(fault)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/_control/faults", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testControlToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("arm %v: got %d", fault, resp.StatusCode)
	}
}

// TestGatewayClientLedger: the client reads the ledger with its control token; without the
// token a guarded gateway refuses, and the client says so rather than report an empty ledger.
func TestGatewayClientLedger(t *testing.T) {
	srv := mustFakeGateway(t, models.SQLite)
	ctx := context.Background()
	client := payments.NewGatewayClient(srv.URL, 5*time.Second)
	client.ControlToken = testControlToken
	pm, err := client.CreatePaymentMethod(ctx, "4242424242424242")
	if err != nil {
		t.Fatal(err)
	}
	if res := client.Charge(ctx, payments.ChargeRequest{Amount: 1400, Currency: "USD",
		PaymentMethod: pm.ID, IdempotencyKey: "ledger-1"}); res.Outcome != payments.OutcomeSucceeded {
		t.Fatalf("charge: got %+v, want succeeded", res)
	}
	t.Run("OK", func(t *testing.T) {
		charges, err := client.Ledger(ctx)
		if err != nil || len(charges) != 1 || charges[0].IdempotencyKey != "ledger-1" {
			t.Fatalf("got %+v, %v; want the one charge", charges, err)
		}
	})
	t.Run("ErrWithoutToken", func(t *testing.T) {
		_, err := payments.NewGatewayClient(srv.URL, 5*time.Second).Ledger(ctx)
		var gwErr *payments.GatewayError
		if !errors.As(err, &gwErr) || gwErr.Status != http.StatusUnauthorized {
			t.Fatalf("got %v, want the gateway's 401", err)
		}
	})
}

func TestGatewayClientClassifiesEveryOutcome(t *testing.T) {
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			srv := mustFakeGateway(t, dialect)
			// One client for every case, so connections are reused: a dropped answer must not be
			// hidden by net/http resending the request on its own.
			client := payments.NewGatewayClient(srv.URL, clientTimeout)
			ctx := context.Background()
			pm := func(t *testing.T, card string) string {
				t.Helper()
				p, err := client.CreatePaymentMethod(ctx, card)
				if err != nil {
					t.Fatal(err)
				}
				return p.ID
			}
			okPM := pm(t, "4242424242424242")
			cases := []struct {
				name    string
				fault   map[string]any
				card    string
				want    payments.Outcome
				charges int // how many charges the ledger holds under the key afterwards
				decline string
				reusePM string
			}{
				{name: "Succeeded", want: payments.OutcomeSucceeded, charges: 1},
				{name: "DeclinedCard", card: "4000000000000002", want: payments.OutcomeDeclined, charges: 1, decline: "card_declined"},
				{name: "DeclinedInsufficientFunds", card: "4000000000009995", want: payments.OutcomeDeclined, charges: 1, decline: "insufficient_funds"},
				{name: "DeclineFault", fault: map[string]any{"fault": "decline", "code": "do_not_honor"}, want: payments.OutcomeDeclined, charges: 1, decline: "do_not_honor"},
				{name: "LatencyWithinTimeout", fault: map[string]any{"fault": "latency", "delay_ms": 10}, want: payments.OutcomeSucceeded, charges: 1},
				{name: "LatencyBeyondTimeout", fault: map[string]any{"fault": "latency", "delay_ms": 1000}, want: payments.OutcomeUnknown, charges: 1},
				{name: "ErrorBeforeCommit", fault: map[string]any{"fault": "error_before_commit"}, want: payments.OutcomeNotCharged},
				{name: "ErrorBeforeCommit429", fault: map[string]any{"fault": "error_before_commit", "status": 429}, want: payments.OutcomeNotCharged},
				{name: "ErrorBeforeCommit500IsConservative", fault: map[string]any{"fault": "error_before_commit", "status": 500}, want: payments.OutcomeUnknown},
				{name: "CardErrorBeforeCommit", card: "4000000000000341", want: payments.OutcomeNotCharged},
				{name: "TimeoutBeforeCommit", fault: map[string]any{"fault": "timeout_before_commit", "delay_ms": 10000}, want: payments.OutcomeUnknown},
				{name: "CommitThenDrop", fault: map[string]any{"fault": "commit_then_drop"}, want: payments.OutcomeUnknown, charges: 1},
				{name: "CardCommitThenDrop", card: "4000000000000119", want: payments.OutcomeUnknown, charges: 1},
				{name: "CommitThenDelay", fault: map[string]any{"fault": "commit_then_delay", "delay_ms": 10000}, want: payments.OutcomeUnknown, charges: 1},
				{name: "CardCommitThenDelay", card: "4000000000000259", want: payments.OutcomeUnknown, charges: 1},
				{name: "CommitThenError", fault: map[string]any{"fault": "commit_then_error"}, want: payments.OutcomeUnknown, charges: 1},
				{name: "CommitThenError502", fault: map[string]any{"fault": "commit_then_error", "status": 502}, want: payments.OutcomeUnknown, charges: 1},
				{name: "WebhookFaultsAreInvisibleHere", fault: map[string]any{"fault": "webhook_duplicate"}, want: payments.OutcomeSucceeded, charges: 1},
				{name: "UnknownPaymentMethod", reusePM: "pm_missing", want: payments.OutcomeRejected},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					if tc.fault != nil {
						mustArm(t, srv, tc.fault)
					}
					method := okPM
					if tc.card != "" {
						method = pm(t, tc.card)
					}
					if tc.reusePM != "" {
						method = tc.reusePM
					}
					key := "pay_" + tc.name + ":charge"
					req := payments.ChargeRequest{Amount: 1500, Currency: "EUR", PaymentMethod: method, IdempotencyKey: key,
						Metadata: map[string]string{"tenant": "acme", "order_id": "ord_" + tc.name, "payment_id": "pay_" + tc.name}}
					res := client.Charge(ctx, req)
					if res.Outcome != tc.want {
						t.Fatalf("got %s (status %d, err %v), want %s", res.Outcome, res.StatusCode, res.Err, tc.want)
					}
					if res.DeclineCode != tc.decline {
						t.Errorf("decline code: got %q, want %q", res.DeclineCode, tc.decline)
					}
					if (res.Outcome == payments.OutcomeUnknown || res.Outcome == payments.OutcomeNotCharged) && res.Err == nil {
						t.Errorf("outcome %s carries no error", res.Outcome)
					}
					// A request the client gave up on may still be committing at the gateway (the
					// latency fault sleeps first), so wait a generous while for the ledger to settle.
					var found []payments.GatewayCharge
					for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
						var err error
						if found, err = client.FindCharges(ctx, key); err != nil {
							t.Fatal(err)
						}
						if len(found) >= tc.charges || time.Now().After(deadline) {
							break
						}
					}
					if len(found) != tc.charges {
						t.Fatalf("ledger: got %d charges under the key, want %d", len(found), tc.charges)
					}
					// The shop's recovery: retry under the same key. It never makes a second charge
					// and always ends in a final answer.
					if tc.want == payments.OutcomeUnknown || tc.want == payments.OutcomeNotCharged {
						if tc.reusePM != "" {
							return
						}
						again := client.Charge(ctx, req)
						if again.Outcome != payments.OutcomeSucceeded {
							t.Fatalf("retry: got %s (%v), want succeeded", again.Outcome, again.Err)
						}
						if len(found) == 1 && (again.Charge.ID != found[0].ID || !again.Replayed) {
							t.Errorf("retry: got %s replayed=%v, want the committed %s replayed", again.Charge.ID, again.Replayed, found[0].ID)
						}
						if found, _ := client.FindCharges(ctx, key); len(found) != 1 {
							t.Errorf("after retry: got %d charges, want 1", len(found))
						}
					}
				})
			}
			t.Run("IdempotencyKeyReuseIsUnknown", func(t *testing.T) {
				req := payments.ChargeRequest{Amount: 100, Currency: "EUR", PaymentMethod: okPM, IdempotencyKey: "pay_reuse:charge"}
				if res := client.Charge(ctx, req); res.Outcome != payments.OutcomeSucceeded {
					t.Fatalf("got %s, want succeeded", res.Outcome)
				}
				req.Amount = 200
				res := client.Charge(ctx, req)
				var ge *payments.GatewayError
				if res.Outcome != payments.OutcomeUnknown || !errors.As(res.Err, &ge) || ge.Code != "idempotency_key_reuse" {
					t.Errorf("got %s %v, want unknown with idempotency_key_reuse", res.Outcome, res.Err)
				}
			})
			t.Run("IgnoreIdempotencyKeyDoubleCharges", func(t *testing.T) {
				mustArm(t, srv, map[string]any{"fault": "ignore_idempotency_key", "times": 2})
				req := payments.ChargeRequest{Amount: 100, Currency: "EUR", PaymentMethod: okPM, IdempotencyKey: "pay_ignored:charge"}
				for range 2 {
					if res := client.Charge(ctx, req); res.Outcome != payments.OutcomeSucceeded {
						t.Fatalf("got %s, want succeeded", res.Outcome)
					}
				}
				if found, _ := client.FindCharges(ctx, req.IdempotencyKey); len(found) != 2 {
					t.Errorf("got %d charges, want 2: the provider ignored the key", len(found))
				}
			})
			t.Run("NoKeyIsNotCharged", func(t *testing.T) {
				res := client.Charge(ctx, payments.ChargeRequest{Amount: 100, Currency: "EUR", PaymentMethod: okPM})
				if res.Outcome != payments.OutcomeNotCharged {
					t.Errorf("got %s, want not_charged", res.Outcome)
				}
			})
			t.Run("GetAndRefund", func(t *testing.T) {
				res := client.Charge(ctx, payments.ChargeRequest{Amount: 300, Currency: "EUR", PaymentMethod: okPM, IdempotencyKey: "pay_refund:charge"})
				got, err := client.GetCharge(ctx, res.Charge.ID)
				if err != nil || got.Status != "succeeded" {
					t.Fatalf("get: got %+v %v", got, err)
				}
				if _, err := client.Refund(ctx, got.ID, ""); err == nil {
					t.Errorf("refund without a key: got no error, want one (nothing sent)")
				}
				refundKey := models.RefundKeyFor("ord_refund", got.ID)
				refunded, err := client.Refund(ctx, got.ID, refundKey)
				if err != nil || refunded.Status != "refunded" {
					t.Fatalf("refund: got %+v %v", refunded, err)
				}
				_, err = client.Refund(ctx, got.ID, refundKey)
				var ge *payments.GatewayError
				if !errors.As(err, &ge) || ge.Code != "charge_already_refunded" || !payments.AlreadyRefunded(err) {
					t.Errorf("second refund: got %v, want charge_already_refunded", err)
				}
				_, err = client.GetCharge(ctx, "ch_missing")
				if !errors.As(err, &ge) || ge.Status != http.StatusNotFound {
					t.Errorf("missing charge: got %v, want a 404 GatewayError", err)
				}
			})
			t.Run("BadCard", func(t *testing.T) {
				_, err := client.CreatePaymentMethod(ctx, "4242424242424241")
				var ge *payments.GatewayError
				if !errors.As(err, &ge) || ge.Code != "invalid_card_number" {
					t.Errorf("got %v, want invalid_card_number", err)
				}
			})
		})
	}
}

func TestGatewayClientConnectionRefusedIsNotCharged(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens here any more
	client := payments.NewGatewayClient("http://"+addr, clientTimeout)
	res := client.Charge(context.Background(), payments.ChargeRequest{Amount: 100, Currency: "EUR", PaymentMethod: "pm_x", IdempotencyKey: "k"})
	if res.Outcome != payments.OutcomeNotCharged || res.Err == nil {
		t.Errorf("got %s %v, want not_charged with an error", res.Outcome, res.Err)
	}
}
