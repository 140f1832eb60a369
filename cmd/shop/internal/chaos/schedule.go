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
	"fmt"
	"hash/fnv"
	"math/rand/v2"

	"checkoutlab/payments"
)

// Options are a run's flags. Every one of them, the seed first, shapes the schedule.
type Options struct {
	Seed      int64
	Purchases int
	Clients   int
	Replicas  int
	// Off is the one protection turned off, "" for none. client_same_key is the clients'
	// habit; every other switch is the replicas'.
	Off payments.Switch
	// DatabaseURL is a PostgreSQL database for the run's stack; "" is a fresh embedded SQLite
	// database. It does not shape the schedule: the same plan runs on either.
	DatabaseURL string
}

// Defaults of the CLI and the page.
const (
	DefaultPurchases = 200
	DefaultClients   = 8
	DefaultReplicas  = 3
)

// Check refuses options no run can have.
func (o Options) Check() error {
	switch {
	case o.Purchases < 1 || o.Purchases > 20000:
		return fmt.Errorf("purchases: got %d, want 1 to 20000", o.Purchases)
	case o.Clients < 1 || o.Clients > 64:
		return fmt.Errorf("clients: got %d, want 1 to 64", o.Clients)
	case o.Replicas < 1 || o.Replicas > 8:
		return fmt.Errorf("replicas: got %d, want 1 to 8", o.Replicas)
	}
	return payments.Protections{Off: o.Off}.Check()
}

// Actions of a schedule's events.
const (
	ActionFault        = "fault"         // arm a gateway fault (it strikes the next charge)
	ActionKill         = "kill"          // SIGKILL a replica, then start it again
	ActionCrashPoint   = "crash_point"   // restart a replica with SHOP_CRASH_AT: it dies there
	ActionDoubleSubmit = "double_submit" // the purchase is sent twice at once (a double click)
	ActionDeclineCard  = "decline_card"  // the purchase pays with a card that is declined
)

// Event is one strike of the schedule, made just before purchase Purchase (counted from 0)
// starts.
type Event struct {
	Purchase int    `json:"purchase"`
	Action   string `json:"action"`
	Fault    string `json:"fault,omitempty"`
	DelayMS  int    `json:"delay_ms,omitempty"`
	Times    int    `json:"times,omitempty"`
	Copies   int    `json:"copies,omitempty"`
	Replica  int    `json:"replica,omitempty"` // counted from 1
	CrashAt  string `json:"crash_at,omitempty"`
}

// Line is one line of a purchase's cart.
type Line struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// Purchase is what one customer means to buy.
type Purchase struct {
	Index  int
	Tenant string
	Lines  []Line
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
	events func(i int) []Event
}

// gatewayFaults strike a charge. Those after the commit (the charge is made but its answer
// is lost, late or an error) come with late webhooks, so that the shop must find out what
// happened from a retry or the completer, not from the webhook: the case a fresh gateway key
// per attempt gets wrong.
var gatewayFaults = []weighted{
	{3, func(i int) []Event { return afterCommit(i, "commit_then_drop", 0) }},
	{2, func(i int) []Event { return afterCommit(i, "commit_then_delay", 1500) }},
	{2, func(i int) []Event { return afterCommit(i, "commit_then_error", 0) }},
	{2, func(i int) []Event { return []Event{{Purchase: i, Action: ActionFault, Fault: "error_before_commit"}} }},
	{1, func(i int) []Event {
		return []Event{{Purchase: i, Action: ActionFault, Fault: "timeout_before_commit", DelayMS: 1500}}
	}},
	{2, func(i int) []Event {
		return []Event{{Purchase: i, Action: ActionFault, Fault: "latency", DelayMS: 300}}
	}},
}

func afterCommit(i int, fault string, delay int) []Event {
	return []Event{
		{Purchase: i, Action: ActionFault, Fault: "webhook_delay", DelayMS: 2500, Times: 2},
		{Purchase: i, Action: ActionFault, Fault: fault, DelayMS: delay},
	}
}

// webhookFaults strike the next charge's webhooks.
var webhookFaults = []weighted{
	{2, func(i int) []Event {
		return []Event{{Purchase: i, Action: ActionFault, Fault: "webhook_duplicate", Copies: 3}}
	}},
	{2, func(i int) []Event {
		return []Event{ // reversed and late, so that charge.pending lands after charge.succeeded
			{Purchase: i, Action: ActionFault, Fault: "webhook_delay", DelayMS: 500},
			{Purchase: i, Action: ActionFault, Fault: "webhook_reorder"},
		}
	}},
	{1, func(i int) []Event {
		return []Event{{Purchase: i, Action: ActionFault, Fault: "webhook_delay", DelayMS: 2000}}
	}},
	{1, func(i int) []Event {
		return []Event{{Purchase: i, Action: ActionFault, Fault: "webhook_fail", Times: 2}}
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
func Plan(o Options) ([]Event, []Purchase) {
	h := fnv.New64a()
	fmt.Fprintf(h, "purchases=%d clients=%d replicas=%d off=%s", o.Purchases, o.Clients, o.Replicas, o.Off)
	rng := rand.New(rand.NewPCG(uint64(o.Seed), h.Sum64()))

	var events []Event
	purchases := make([]Purchase, o.Purchases)
	lastKill := -killGap
	for i := range purchases {
		p := Purchase{Index: i, Tenant: "acme", Card: cardOK, Copies: 1}
		if rng.IntN(10) < 3 {
			p.Tenant = "globex"
		}
		skus := catalogue[p.Tenant]
		for range 1 + rng.IntN(2) {
			p.Lines = append(p.Lines, Line{SKU: skus[rng.IntN(len(skus))], Quantity: 1 + rng.IntN(2)})
		}
		if rng.Float64() < rateGatewayFault {
			events = append(events, pick(rng, gatewayFaults)(i)...)
		}
		if rng.Float64() < rateWebhookFault {
			events = append(events, pick(rng, webhookFaults)(i)...)
		}
		if rng.Float64() < rateDoubleSubmit {
			p.Copies = 2
			events = append(events, Event{Purchase: i, Action: ActionDoubleSubmit, Copies: 2})
		}
		if rng.Float64() < rateDecline {
			p.Card = cardDeclined
			events = append(events, Event{Purchase: i, Action: ActionDeclineCard})
		}
		kill, crash := rng.Float64() < rateKill, rng.Float64() < rateCrashPoint
		replica := 1 + rng.IntN(o.Replicas)
		point := payments.CrashPoints[rng.IntN(len(payments.CrashPoints))]
		if i-lastKill >= killGap && i > 0 {
			switch {
			case crash:
				events = append(events, Event{Purchase: i, Action: ActionCrashPoint, Replica: replica, CrashAt: point})
				lastKill = i
			case kill:
				events = append(events, Event{Purchase: i, Action: ActionKill, Replica: replica})
				lastKill = i
			}
		}
		purchases[i] = p
	}
	return events, purchases
}

func pick(rng *rand.Rand, ws []weighted) func(int) []Event {
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
