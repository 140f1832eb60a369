// Package chaos is `shop lab chaos` and the /lab/chaos page: many purchases at once on N shop
// replicas behind a load balancer, with a seeded schedule of gateway faults, webhook faults,
// replica kills and crash points, judged afterwards by the failure lab's invariants.
//
// A scenario of the lab (payments/lab) shows one failure at a time; real double charges come
// from many small faults at once, across several servers. A chaos run throws them together
// and checks, from the gateway's ledger and the shop's own records, that nobody was charged
// twice and nothing was lost — or, with one protection off, shows what that protection is
// worth. The shop is stateless, every guarantee lives in the database, so N replicas on one
// database must behave as one shop.
//
// The run is made of:
//   - schedule.go: the plan, made from the seed alone — which purchase buys what, and what
//     strikes just before it starts. The same seed and flags give the same plan.
//   - run.go: the stack (labrun.ReplicaStack), the clients and the strikes.
//   - client.go: a customer that retries with the same key, as static/js/checkout.js does.
//   - judge.go: settling and the invariants.
//   - command.go: the CLI.
package chaos

import (
	"checkoutlab/payments/lab"
	"fmt"
	"hash/fnv"
	"math/rand/v2"

	"checkoutlab/payments"
)

// Purchase is what one customer means to buy.
type Purchase struct {
	Index  int
	Tenant string
	Lines  []lab.ChaosLine
	Card   string
	Copies int // requests sent at once with the same key (2: a double click)
}

const (
	cardOK       = "4242424242424242"
	cardDeclined = "4000000000000002"
)

// The catalogue the customers buy from: the demo's products with plenty of stock.
var catalogue = map[string][]string{
	"acme":   {"trail-pack-30", "steel-bottle", "merino-beanie", "camp-mug", "headlamp", "rain-shell", "hiking-socks"},
	"globex": {"espresso-beans", "gooseneck-kettle", "ceramic-dripper", "burr-grinder", "paper-filters", "barista-apron"},
}

type weighted struct {
	weight int
	events func(i int) []lab.ChaosEvent
}

// gatewayFaults strike a charge. Those after the commit (the charge is made but its answer
// is lost, late or an error) come with late webhooks, so that the shop must find out what
// happened from a retry or the completer, not from the webhook: the case a fresh gateway key
// per attempt gets wrong.
var gatewayFaults = []weighted{
	{3, func(i int) []lab.ChaosEvent { return afterCommit(i, "commit_then_drop", 0) }},
	{2, func(i int) []lab.ChaosEvent { return afterCommit(i, "commit_then_delay", 1500) }},
	{2, func(i int) []lab.ChaosEvent { return afterCommit(i, "commit_then_error", 0) }},
	{2, func(i int) []lab.ChaosEvent {
		return []lab.ChaosEvent{{Purchase: i, Action: lab.ChaosActionFault, Fault: "error_before_commit"}}
	}},
	{1, func(i int) []lab.ChaosEvent {
		return []lab.ChaosEvent{{Purchase: i, Action: lab.ChaosActionFault, Fault: "timeout_before_commit", DelayMS: 1500}}
	}},
	{2, func(i int) []lab.ChaosEvent {
		return []lab.ChaosEvent{{Purchase: i, Action: lab.ChaosActionFault, Fault: "latency", DelayMS: 300}}
	}},
}

func afterCommit(i int, fault string, delay int) []lab.ChaosEvent {
	return []lab.ChaosEvent{
		{Purchase: i, Action: lab.ChaosActionFault, Fault: "webhook_delay", DelayMS: 2500, Times: 2},
		{Purchase: i, Action: lab.ChaosActionFault, Fault: fault, DelayMS: delay},
	}
}

// webhookFaults strike the next charge's webhooks.
var webhookFaults = []weighted{
	{2, func(i int) []lab.ChaosEvent {
		return []lab.ChaosEvent{{Purchase: i, Action: lab.ChaosActionFault, Fault: "webhook_duplicate", Copies: 3}}
	}},
	{2, func(i int) []lab.ChaosEvent {
		return []lab.ChaosEvent{ // reversed and late, so that charge.pending lands after charge.succeeded
			{Purchase: i, Action: lab.ChaosActionFault, Fault: "webhook_delay", DelayMS: 500},
			{Purchase: i, Action: lab.ChaosActionFault, Fault: "webhook_reorder"},
		}
	}},
	{1, func(i int) []lab.ChaosEvent {
		return []lab.ChaosEvent{{Purchase: i, Action: lab.ChaosActionFault, Fault: "webhook_delay", DelayMS: 2000}}
	}},
	{1, func(i int) []lab.ChaosEvent {
		return []lab.ChaosEvent{{Purchase: i, Action: lab.ChaosActionFault, Fault: "webhook_fail", Times: 2}}
	}},
}

// Rates per purchase, and the fewest purchases between two process kills (a replica takes a
// moment to start again).
const (
	rateGatewayFault = 0.10
	rateWebhookFault = 0.06
	rateDoubleSubmit = 0.03
	rateDecline      = 0.04
	rateKill         = 0.025
	rateCrashPoint   = 0.012
	killGap          = 12
)

// Plan makes the run's schedule and purchases from o alone: a pure function, so the same
// seed and flags give the same plan (and the database does not change it).
func Plan(o lab.ChaosOptions) ([]lab.ChaosEvent, []Purchase) {
	h := fnv.New64a()
	fmt.Fprintf(h, "purchases=%d clients=%d replicas=%d off=%s", o.Purchases, o.Clients, o.Replicas, o.Off)
	rng := rand.New(rand.NewPCG(uint64(o.Seed), h.Sum64()))

	var events []lab.ChaosEvent
	purchases := make([]Purchase, o.Purchases)
	lastKill := -killGap
	for i := range purchases {
		p := Purchase{Index: i, Tenant: "acme", Card: cardOK, Copies: 1}
		if rng.IntN(10) < 3 {
			p.Tenant = "globex"
		}
		skus := catalogue[p.Tenant]
		for range 1 + rng.IntN(2) {
			p.Lines = append(p.Lines, lab.ChaosLine{SKU: skus[rng.IntN(len(skus))], Quantity: 1 + rng.IntN(2)})
		}
		if rng.Float64() < rateGatewayFault {
			events = append(events, pick(rng, gatewayFaults)(i)...)
		}
		if rng.Float64() < rateWebhookFault {
			events = append(events, pick(rng, webhookFaults)(i)...)
		}
		if rng.Float64() < rateDoubleSubmit {
			p.Copies = 2
			events = append(events, lab.ChaosEvent{Purchase: i, Action: lab.ChaosActionDoubleSubmit, Copies: 2})
		}
		if rng.Float64() < rateDecline {
			p.Card = cardDeclined
			events = append(events, lab.ChaosEvent{Purchase: i, Action: lab.ChaosActionDeclineCard})
		}
		kill, crash := rng.Float64() < rateKill, rng.Float64() < rateCrashPoint
		replica := 1 + rng.IntN(o.Replicas)
		point := payments.CrashPoints[rng.IntN(len(payments.CrashPoints))]
		if i-lastKill >= killGap && i > 0 {
			switch {
			case crash:
				events = append(events, lab.ChaosEvent{Purchase: i, Action: lab.ChaosActionCrashPoint, Replica: replica, CrashAt: point})
				lastKill = i
			case kill:
				events = append(events, lab.ChaosEvent{Purchase: i, Action: lab.ChaosActionKill, Replica: replica})
				lastKill = i
			}
		}
		purchases[i] = p
	}
	return events, purchases
}

func pick(rng *rand.Rand, ws []weighted) func(int) []lab.ChaosEvent {
	total := 0
	for _, w := range ws {
		total += w.weight
	}
	n := rng.IntN(total)
	for _, w := range ws {
		if n < w.weight {
			return w.events
		}
		n -= w.weight
	}
	return ws[len(ws)-1].events
}
