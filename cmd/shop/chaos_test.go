package main

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"checkoutlab/cmd/shop/internal/chaos"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
	"checkoutlab/payments/lab"
)

// TestChaos makes chaos runs on each database, with the shop built as the replicas' program:
// with every protection on nothing is charged twice or lost while replicas are killed and
// faults strike; without derived gateway keys cards are charged twice; with a client that
// makes a new key per retry, the reconciliation report lists suspected duplicate purchases.
// The counts are small enough for the suite; docs/benchmarks.md has the big run's figures.
func TestChaos(t *testing.T) {
	t.Parallel() // TestLab and TestChaos run side by side, after the other tests: see TestMain
	for _, dialect := range []string{models.SQLite, models.Postgres} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			runner := &chaos.Runner{Lab: testLab(t, "")}
			run := func(t *testing.T, o lab.ChaosOptions) *lab.ChaosResult {
				t.Helper()
				o.Seed, o.Clients, o.Replicas = 1, 8, 2
				o.DatabaseURL = modelstest.MustDatabaseURL(t, dialect)
				res, err := runner.Run(context.Background(), o, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				if want, _ := chaos.Plan(o); !reflect.DeepEqual(res.Schedule, want) {
					t.Errorf("the run's schedule is not the seed's plan")
				}
				if len(res.Problems) > 0 || res.Unsettled != "" {
					t.Errorf("the lab could not do what it meant to: %q; still unsettled: %q", res.Problems, res.Unsettled)
				}
				if res.Answered+res.GaveUp != o.Purchases {
					t.Errorf("got %d answered + %d gave up, want %d purchases", res.Answered, res.GaveUp, o.Purchases)
				}
				return res
			}

			t.Run("EveryProtectionOn", func(t *testing.T) {
				res := run(t, lab.ChaosOptions{Purchases: 200})
				if !res.OK || res.DoubleCharges != 0 || res.Lost != 0 || res.DuplicateOrders != 0 || len(res.Overcharged) != 0 {
					t.Errorf("got %d double charges, %d lost, %d duplicate orders, overcharged %v (%s), want none; invariants %+v",
						res.DoubleCharges, res.Lost, res.DuplicateOrders, res.Overcharged, res.Verdict, res.Invariants)
				}
				if res.Kills == 0 || res.Faults == 0 {
					t.Errorf("got %d kills and %d faults, want some of each: a run without them proves nothing", res.Kills, res.Faults)
				}
			})
			t.Run("DerivedGatewayKeyOff", func(t *testing.T) {
				res := run(t, lab.ChaosOptions{Purchases: 100, Off: payments.SwitchDerivedGatewayKey})
				if !res.OK || res.DoubleCharges == 0 || len(res.Overcharged) == 0 {
					t.Errorf("got %d double charges, overcharged %v (%s), want some", res.DoubleCharges, res.Overcharged, res.Verdict)
				}
			})
			t.Run("ClientSameKeyOff", func(t *testing.T) {
				res := run(t, lab.ChaosOptions{Purchases: 100, Off: payments.SwitchClientSameKey})
				if !res.OK || res.SuspectedDuplicates == 0 {
					t.Errorf("got %d suspected duplicate purchases, %d duplicate orders (%s), want some", res.SuspectedDuplicates, res.DuplicateOrders, res.Verdict)
				}
			})
		})
	}
}

// TestChaosCommand: `shop lab chaos --json` prints the run with the documented fields and
// returns nil when the verdict is the expected one; a bad flag is an error.
func TestChaosCommand(t *testing.T) {
	t.Parallel() // mostly waiting: it runs beside TestLab and TestChaos (see TestMain)
	lab := testLab(t, "")
	var out, errOut bytes.Buffer
	err := lab.Command(context.Background(), []string{"chaos", "--seed", "3", "--purchases", "40", "--replicas", "2", "--json"}, &out, &errOut)
	if err != nil {
		t.Fatalf("lab chaos: got %v, want nil\n%s", err, errOut.String())
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("lab chaos --json: %v\n%s", err, out.String())
	}
	for _, k := range []string{"seed", "purchases", "answered", "gave_up", "double_charges", "duplicate_orders", "lost",
		"overcharged", "kills", "schedule", "invariants", "verdict", "ok"} {
		if _, ok := got[k]; !ok {
			t.Errorf("lab chaos --json has no %q", k)
		}
	}
	if got["ok"] != true || got["seed"] != float64(3) || got["purchases"] != float64(40) {
		t.Errorf("got ok %v, seed %v, purchases %v; want true, 3, 40", got["ok"], got["seed"], got["purchases"])
	}
	if err := lab.Command(context.Background(), []string{"chaos", "--off", "seatbelts"}, &out, &errOut); err == nil {
		t.Errorf("lab chaos --off seatbelts: got nil, want an error")
	}
}
