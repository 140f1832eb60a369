package chaos

import (
	"checkoutlab/payments/lab"
	"reflect"
	"testing"

	"checkoutlab/payments"
)

// TestPlanIsSeeded: the same seed and flags give the same schedule and purchases, whatever
// the database; another seed or other flags give another one.
func TestPlanIsSeeded(t *testing.T) {
	o := lab.ChaosOptions{Seed: 7, Purchases: 300, Clients: 8, Replicas: 3}
	events, purchases := Plan(o)
	again, againPurchases := Plan(lab.ChaosOptions{Seed: 7, Purchases: 300, Clients: 8, Replicas: 3,
		DatabaseURL: "postgres://postgres@127.0.0.1:5432/elsewhere"})
	if !reflect.DeepEqual(events, again) || !reflect.DeepEqual(purchases, againPurchases) {
		t.Fatalf("two plans of seed 7 differ:\n%+v\n%+v", events[:min(5, len(events))], again[:min(5, len(again))])
	}
	for name, other := range map[string]lab.ChaosOptions{
		"seed":     {Seed: 8, Purchases: 300, Clients: 8, Replicas: 3},
		"replicas": {Seed: 7, Purchases: 300, Clients: 8, Replicas: 2},
		"off":      {Seed: 7, Purchases: 300, Clients: 8, Replicas: 3, Off: payments.SwitchDerivedGatewayKey},
	} {
		if got, _ := Plan(other); reflect.DeepEqual(got, events) {
			t.Errorf("another %s gave the same schedule, want another one", name)
		}
	}
}

// TestPlanStrikes: a plan of a few hundred purchases strikes with every kind of event, on
// replicas that exist, never two process kills closer than killGap purchases, in purchase
// order.
func TestPlanStrikes(t *testing.T) {
	o := lab.ChaosOptions{Seed: 1, Purchases: 400, Clients: 8, Replicas: 3}
	events, purchases := Plan(o)
	seen := map[string]int{}
	lastKill := -killGap
	for i, e := range events {
		seen[e.Action]++
		if i > 0 && e.Purchase < events[i-1].Purchase {
			t.Fatalf("event %d (purchase %d) comes after purchase %d, want purchase order", i, e.Purchase, events[i-1].Purchase)
		}
		switch e.Action {
		case lab.ChaosActionKill, lab.ChaosActionCrashPoint:
			if e.Replica < 1 || e.Replica > o.Replicas {
				t.Errorf("event %d kills replica %d, want 1 to %d", i, e.Replica, o.Replicas)
			}
			if e.Purchase-lastKill < killGap {
				t.Errorf("kills at purchases %d and %d, want at least %d apart", lastKill, e.Purchase, killGap)
			}
			lastKill = e.Purchase
		case lab.ChaosActionDoubleSubmit:
			if purchases[e.Purchase].Copies != 2 {
				t.Errorf("purchase %d is double-submitted in the schedule but has %d copies", e.Purchase, purchases[e.Purchase].Copies)
			}
		case lab.ChaosActionDeclineCard:
			if purchases[e.Purchase].Card != cardDeclined {
				t.Errorf("purchase %d's card is declined in the schedule but is %s", e.Purchase, purchases[e.Purchase].Card)
			}
		}
	}
	for _, a := range []string{lab.ChaosActionFault, lab.ChaosActionKill, lab.ChaosActionCrashPoint, lab.ChaosActionDoubleSubmit, lab.ChaosActionDeclineCard} {
		if seen[a] == 0 {
			t.Errorf("no %s event in %d purchases, want some", a, o.Purchases)
		}
	}
}

func TestOptionsCheck(t *testing.T) {
	for _, o := range []lab.ChaosOptions{
		{Purchases: 0, Clients: 1, Replicas: 1},
		{Purchases: 1, Clients: 0, Replicas: 1},
		{Purchases: 1, Clients: 1, Replicas: 9},
		{Purchases: 1, Clients: 1, Replicas: 1, Off: "seatbelts"},
	} {
		if err := o.Check(); err == nil {
			t.Errorf("Check(%+v): got nil, want an error", o)
		}
	}
}
