package labrun

import (
	"strings"
	"testing"

	"checkoutlab/models"
	"checkoutlab/payments/lab"
)

// TestChecksDirections: the harm invariants break only on too much (a second paid order, a
// second receipt); work that went missing breaks purchases_complete instead, which no
// scenario's switch names, so it can never pass as a reproduced bug.
func TestChecksDirections(t *testing.T) {
	s, _ := lab.Find("crash_before_response") // breaks paid_orders without server idempotency
	paid := func(id string, receipts int) order {
		return order{ID: id, Status: models.OrderPaid, Receipts: receipts}
	}
	broken := func(checks []lab.Check) []string {
		var names []string
		for _, c := range checks {
			if !c.Holds {
				names = append(names, c.Invariant)
			}
		}
		return names
	}
	for _, c := range []struct {
		name       string
		orders     []order
		wantBroken string
		reproduces bool
	}{
		{"AsMeant", []order{paid("o1", 1)}, "", false},
		{"PaidTwice", []order{paid("o1", 1), paid("o2", 1)}, lab.PaidOrders, true},
		{"NothingPaid", []order{{ID: "o1", Status: models.OrderPendingPayment}}, lab.PurchasesComplete, false},
		{"ReceiptMissing", []order{paid("o1", 0)}, lab.PurchasesComplete, false},
		{"ReceiptTwice", []order{paid("o1", 2)}, lab.ReceiptsPerPaidOrder, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			checks := checksOf(s, c.orders, nil, nil)
			if got := strings.Join(broken(checks), ","); got != c.wantBroken {
				t.Errorf("got broken %q, want %q; checks %+v", got, c.wantBroken, checks)
			}
			r := lab.Result{Mode: lab.Unprotected, Checks: checks}
			lab.Judge(s, &r)
			if r.OK != c.reproduces {
				t.Errorf("unprotected verdict %q (ok=%v), want ok=%v", r.Verdict, r.OK, c.reproduces)
			}
		})
	}
}

// TestJudge: a verdict is ok only when the run proves what the scenario claims.
func TestJudge(t *testing.T) {
	s, _ := lab.Find("double_click")
	broken := []lab.Check{{Invariant: lab.OrdersPerKey, Holds: false}}
	held := []lab.Check{{Invariant: lab.OrdersPerKey, Holds: true}}
	for _, c := range []struct {
		name   string
		mode   lab.Mode
		checks []lab.Check
		want   bool
	}{
		{"ProtectedHolds", lab.Protected, held, true},
		{"ProtectedBreaks", lab.Protected, broken, false},
		{"UnprotectedReproduces", lab.Unprotected, broken, true},
		{"UnprotectedDoesNotReproduce", lab.Unprotected, held, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := lab.Result{Mode: c.mode, Checks: c.checks}
			lab.Judge(s, &r)
			if r.OK != c.want {
				t.Errorf("got ok=%v (%s), want %v", r.OK, r.Verdict, c.want)
			}
		})
	}
}
