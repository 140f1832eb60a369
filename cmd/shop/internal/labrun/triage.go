package labrun

// The failure lab's operator: the triage desk's actions as a scenario's step, and the
// invariants that judge a repair.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	"checkoutlab/models"
	"checkoutlab/payments"
	"checkoutlab/payments/lab"
)

// triage sends tr's action tr.Copies times at once, each under its own Idempotency-Key, on the
// order that the answers to the Checkout step tr.OrderOf named, and notes every answer.
func (c *client) triage(ctx context.Context, t *target, tr lab.Triage) error {
	tenant := tr.Tenant
	if tenant == "" {
		tenant = "acme"
	}
	orders := slices.Sorted(maps.Keys(c.answerSets()[tenant+"/"+c.runID+"-"+tr.OrderOf]))
	if len(orders) != 1 {
		return fmt.Errorf("triage: the checkout %s was answered with %d orders, want 1", tr.OrderOf, len(orders))
	}
	reason := tr.Reason
	if reason == "" {
		reason = "lab: " + tr.Action
	}
	body, _ := json.Marshal(map[string]string{"action": tr.Action, "order_id": orders[0], "reason": reason})
	var wg sync.WaitGroup
	for i := range max(tr.Copies, 1) {
		key := fmt.Sprintf("%s-triage-%s-%d", c.runID, tr.Action, i+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.recordAs(models.ActorClient, "triage", tenant, key, fmt.Sprintf("operator sent %s on order %s with key %s", tr.Action, orders[0], key))
			a := Post(ctx, c.http, t.shop+"/api/v1/reconciliation/actions", t.apiKeys[tenant], key, body)
			detail := answerDetail(a)
			if result, _ := a.Body["result"].(string); result != "" {
				detail += " " + result
			}
			c.recordAs(models.ActorClient, "triage", tenant, key, "operator got "+detail)
		}()
	}
	wg.Wait()
	return nil
}

// repairChecks checks the invariants of s.Repair over the run's orders, the gateway's charges
// and each tenant's reconciliation report.
func (t *target) repairChecks(ctx context.Context, s lab.Scenario, orders []order, charges []Charge) ([]lab.Check, error) {
	var checks []lab.Check
	for _, inv := range s.Repair {
		switch inv {
		case lab.KeepsOneCharge:
			succeeded := map[string]int{}
			for _, ch := range charges {
				if ch.Status == "succeeded" {
					succeeded[ch.Metadata["order_id"]]++
				}
			}
			var wrong []string
			for _, o := range orders {
				want := 0
				if o.Status == models.OrderPaid {
					want = 1
				}
				if succeeded[o.ID] != want {
					wrong = append(wrong, fmt.Sprintf("%s (%s) keeps %d", o.ID, o.Status, succeeded[o.ID]))
				}
			}
			detail := fmt.Sprintf("every paid order of %d keeps one succeeded charge, every other order none", len(orders))
			if len(wrong) > 0 {
				detail = fmt.Sprintf("%v (want 1 per paid order, 0 otherwise)", wrong)
			}
			checks = append(checks, lab.Check{Invariant: inv, Holds: len(wrong) == 0, Detail: detail})
		case lab.ReconciliationClean:
			reports := map[string]*payments.Report{}
			var named []string
			for _, o := range orders {
				rep := reports[o.tenant]
				if rep == nil {
					rep = &payments.Report{}
					if err := getJSON(ctx, t.http, t.shop+"/api/v1/reconciliation", t.apiKeys[o.tenant], rep); err != nil {
						return nil, fmt.Errorf("read %s's reconciliation: %w", o.tenant, err)
					}
					reports[o.tenant] = rep
				}
				for _, f := range rep.FindingsOf(o.ID) {
					if f != payments.FindingSuspectedDuplicate {
						named = append(named, o.ID+" in "+f)
					}
				}
			}
			detail := "the report names none of the run's orders"
			if len(named) > 0 {
				detail = fmt.Sprintf("the report lists %v (want none)", named)
			}
			checks = append(checks, lab.Check{Invariant: inv, Holds: len(named) == 0, Detail: detail})
		default:
			return nil, fmt.Errorf("scenario %s: no check for the repair invariant %q", s.Name, inv)
		}
	}
	return checks, nil
}
