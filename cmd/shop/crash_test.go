package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"checkoutlab/cmd/shop/internal/labrun"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
)

// mustCrashStack starts the lab's crash stack for a drill: the fake gateway in this process,
// the real shop program as a child process on a listener the test keeps, dying at crashAt
// ("" for never). It stops when the test ends; the shop's output is logged on failure.
func mustCrashStack(tb testing.TB, dialect, crashAt string) *labrun.CrashStack {
	tb.Helper()
	st, err := testLab(tb, modelstest.MustDatabaseURL(tb, dialect)).StartCrashStack(context.Background(), "", crashAt,
		withEnv(fastEnv, map[string]string{"IDEMPOTENCY_LEASE": "1s"}))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("--- output of the shop:\n%s", st.Shop.Output())
		}
		st.Close()
	})
	return st
}

// crashGateway is a crash stack's gateway, with its control token.
func crashGateway(st *labrun.CrashStack) testGateway {
	return testGateway{st.Gateway.URL(), st.ControlToken}
}

// TestCrashDrills kills the real shop process (SIGKILL, from itself) at each crash point in the
// middle of a checkout, restarts it on the same database, and checks that the operation reaches
// exactly one final outcome — once through a client retry with the same key, and once through
// the completer alone with no client at all.
func TestCrashDrills(t *testing.T) {
	t.Parallel() // mostly waiting: it runs beside TestLab and TestChaos (see TestMain)
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			for _, point := range payments.CrashPoints {
				for _, recovery := range []string{"Retry", "CompleterAlone"} {
					t.Run(point+"/"+recovery, func(t *testing.T) {
						st := mustCrashStack(t, dialect, point)
						shop, gateway := st.Shop.URL(), crashGateway(st)
						a := post(shop, "/api/v1/checkout", "drill", checkoutBody("4242424242424242"))
						if a.Err == nil {
							t.Fatalf("got an answer (%d %s) from a shop that should have died at %s", a.Status, a.Raw, point)
						}
						// Killed by SIGKILL at the crash point, then started again on the same
						// address and database.
						if _, err := st.Restart(context.Background()); err != nil {
							t.Fatal(err)
						}
						db := st.DB
						keys := models.NewIdempotencyStore(db)

						if recovery == "Retry" {
							final, _ := retryUntilFinal(t, shop, "/api/v1/checkout", "drill", checkoutBody("4242424242424242"), 40)
							if final.Status != http.StatusCreated {
								t.Fatalf("retry after the crash: got %d %s, want 201", final.Status, final.Raw)
							}
							orderID := final.OrderID()
							if got := succeededCharges(t, gateway, orderID); got != 1 {
								t.Errorf("succeeded charges: got %d, want 1", got)
							}
						} else {
							// No client: the completer alone must settle it.
							eventually(t, 20*time.Second, "the completer to settle the operation", func() bool {
								r, err := keys.Get(context.Background(), "acme", "drill")
								if point == payments.CrashAfterKeyReserved {
									return err != nil // nothing had happened: the key is dropped
								}
								return err == nil && r.State == models.KeyCompleted
							})
						}

						// Whatever the path: at most one order for the key's operation, paid iff
						// charged, and exactly one charge in the ledger per paid order.
						var orders []models.Order
						db.Where("tenant_id = ?", "acme").Find(&orders)
						charges := mustLedger(t, gateway)
						paid := 0
						for _, o := range orders {
							n := 0
							for _, c := range charges {
								if c.Metadata["order_id"] == o.ID && c.Status == "succeeded" {
									n++
								}
							}
							if o.Status == models.OrderPaid {
								paid++
							}
							if (o.Status == models.OrderPaid) != (n == 1) || n > 1 {
								t.Errorf("order %s is %s with %d succeeded charges, want paid with exactly 1", o.ID, o.Status, n)
							}
						}
						wantOrders := 1
						if point == payments.CrashAfterKeyReserved && recovery == "CompleterAlone" {
							wantOrders = 0
						}
						if len(orders) != wantOrders || paid != wantOrders || len(charges) != wantOrders {
							t.Errorf("got %d orders (%d paid) and %d charges, want %d of each", len(orders), paid, len(charges), wantOrders)
						}
					})
				}
			}
		})
	}
}

// TestTwoShopProcesses runs two shop processes on one PostgreSQL database and one gateway, and
// sends the retries of one checkout alternately to each. The gateway answers the first charge
// only after the shop's client timeout (the lost response): whichever process holds the key
// next resumes the operation, asks the gateway, and never charges twice.
func TestTwoShopProcesses(t *testing.T) {
	st := mustCrashStack(t, models.Postgres, "")
	second, err := st.StartShop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	shops := []string{st.Shop.URL(), second.URL()}

	body := checkoutBody("4000000000000259") // commit_then_delay: charged, answered too late
	var final labrun.Answer
	for i := 0; i < 40; i++ {
		final = post(shops[i%2], "/api/v1/checkout", "two-shops", body)
		if final.Err == nil && final.Status == http.StatusCreated {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if final.Status != http.StatusCreated {
		t.Fatalf("got %d %s, want 201 within 40 alternating attempts", final.Status, final.Raw)
	}
	if got := succeededCharges(t, crashGateway(st), final.OrderID()); got != 1 {
		t.Errorf("succeeded charges: got %d, want 1", got)
	}
	for _, shop := range shops {
		again := post(shop, "/api/v1/checkout", "two-shops", body)
		if !again.Replayed || string(again.Raw) != string(final.Raw) {
			t.Errorf("%s: got %d replayed=%v, want the stored 201 replayed", shop, again.Status, again.Replayed)
		}
	}
}
