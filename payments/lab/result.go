package lab

import (
	"fmt"
	"strings"
	"time"

	"checkoutlab/payments"
)

// Check is one invariant's outcome, with the numbers behind it.
type Check struct {
	Invariant string `json:"name"`
	Holds     bool   `json:"holds"`
	Detail    string `json:"detail"` // e.g. "max 2 succeeded charges for one order (want ≤ 1)"
}

// Row is one line of the run's journal, as the shop's order views show it, plus what the
// lab's client saw and did (its attempts and answers, a crash, a reaper run).
type Row struct {
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Kind   string    `json:"kind"`
	Key    string    `json:"idempotency_key,omitempty"`
	Order  string    `json:"order_id,omitempty"`
	Detail string    `json:"detail"`
}

// Charge is an entry of the gateway's ledger, as GET /_control/ledger lists it.
type Charge struct {
	ID             string            `json:"id"`
	Status         string            `json:"status"`
	Amount         int64             `json:"amount"`
	Currency       string            `json:"currency"`
	IdempotencyKey string            `json:"idempotency_key"`
	Metadata       map[string]string `json:"metadata"` // the shop's tenant, order_id and payment_id
	Created        int64             `json:"created"`  // Unix seconds
	FailureCode    string            `json:"failure_code,omitempty"`
}

// MoneyMoved reports whether the charge took the customer's money (a refund gives it back
// later, but the charge happened).
func (c Charge) MoneyMoved() bool { return c.Status == "succeeded" || c.Status == "refunded" }

// Delivery is one webhook of the gateway's delivery log (GET /_control/deliveries).
type Delivery struct {
	EventID   string    `json:"event_id"`
	EventType string    `json:"event_type"`
	ChargeID  string    `json:"charge_id"`
	Status    string    `json:"status"`
	Created   time.Time `json:"created_at"`
	Attempts  []struct {
		Attempt    int       `json:"attempt"`
		StatusCode int       `json:"status_code"`
		Error      string    `json:"error,omitempty"`
		At         time.Time `json:"at"`
	} `json:"attempts"`
}

// Money is an amount in minor units of a currency.
type Money struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// Outcomes: what happened to the customer.
const (
	OutcomeDoubleCharge    = "double_charge"    // one order, more than one charge
	OutcomeDuplicateOrder  = "duplicate_order"  // one purchase, more than one order
	OutcomeDuplicateEffect = "duplicate_effect" // one paid order, two receipts or parcels
	OutcomeStatusRegressed = "status_regressed" // charged, but the order does not show it
	OutcomeClean           = "clean"
)

// Lanes of a run's timeline, left to right: who sends and receives its messages. Jobs are
// the shop's background workers: the outbox, the completer, the reaper.
var Lanes = []string{"client", "shop", "database", "gateway", "jobs"}

// Kinds of message on a timeline.
const (
	MessageRequest  = "request"
	MessageResponse = "response"
	MessageWebhook  = "webhook"
	MessageJob      = "job"
)

// Event is one line of a run's timeline: a message from one lane to another, or a mark on a
// lane (something done to a process, an answer that never came), or a step inside a lane.
type Event struct {
	At    time.Time `json:"at"`
	AtMS  int64     `json:"at_ms"` // since the run's first event
	Lane  string    `json:"lane"`  // a message's sender, or where a mark is
	Kind  string    `json:"kind"`  // "charge" for a ledger entry; else the journal's kind, or "lost", "crash", …
	Label string    `json:"label"` // what the diagram writes
	// Detail is the whole story of the event: the journal's detail, the ledger's row.
	Detail   string `json:"detail"`
	Key      string `json:"idempotency_key,omitempty"`
	Order    string `json:"order_id,omitempty"`
	ChargeID string `json:"charge_id,omitempty"`
	// Decisive marks the events that decide the outcome: a second charge, the lookup that
	// found the first one, the crash.
	Decisive bool `json:"decisive,omitempty"`
	// Tone is "harm" (money or work done twice), "recovery" (the mechanism at work), "fault"
	// (what the scenario breaks on purpose), or "".
	Tone string `json:"tone,omitempty"`
	// Message is the index in Result.Messages of the message this event is, or -1 for a mark
	// or a step.
	Message int  `json:"message"`
	Mark    bool `json:"mark,omitempty"`
}

// Message is one real message between two lanes: a request and its response, a webhook, a
// job. Answers is the index of the request a response answers, or -1.
type Message struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Kind    string `json:"kind"`
	Label   string `json:"label"`
	AtMS    int64  `json:"at_ms"`
	Answers int    `json:"answers"`
	// Ref names what the message is about: an idempotency key and attempt, a charge, a
	// webhook event, a job.
	Ref string `json:"ref,omitempty"`
}

// Result is one run of one scenario, with the evidence it was judged from. Its JSON is the
// schema of /lab/runs/{id}.json and of `shop lab run --json`.
type Result struct {
	ID          string            `json:"id"`
	Scenario    string            `json:"scenario"`
	Mode        Mode              `json:"mode"`
	Off         payments.Switch   `json:"off"`
	Database    string            `json:"database"`
	Shop        string            `json:"shop,omitempty"`     // a run against a running shop (--shop)
	Seed        int64             `json:"seed"`               // makes the run's keys and customer
	Settings    map[string]string `json:"settings,omitempty"` // the lab stack's environment
	StartedAt   time.Time         `json:"started_at"`
	Outcome     string            `json:"outcome"`
	Overcharged Money             `json:"overcharged"`
	// Charged is every charge that moved money, per order: what the customer paid.
	Charged        Money            `json:"charged"`
	Checks         []Check          `json:"invariants"`
	Events         []Event          `json:"events"`
	Messages       []Message        `json:"messages"`
	Ledger         []Charge         `json:"ledger"`
	Deliveries     []Delivery       `json:"deliveries"`
	Reconciliation *payments.Report `json:"reconciliation"`
	Timeline       []Row            `json:"journal"`
	OK             bool             `json:"ok"`
	Verdict        string           `json:"verdict"`
	// Unsettled says what background work was still going on when the lab stopped waiting.
	Unsettled string        `json:"unsettled,omitempty"`
	Err       string        `json:"error,omitempty"` // the run itself failed
	Took      time.Duration `json:"took_ns"`
}

// Harmful reports whether the outcome hurt the customer.
func (r Result) Harmful() bool { return r.Outcome != OutcomeClean && r.Outcome != "" }

// Assess sets r's outcome and money from its ledger and invariants: what happened to the
// customer, whichever mode made it happen. paidOrders is how many orders the customers
// meant to pay.
func Assess(r *Result, paidOrders int) {
	holds := map[string]bool{}
	for _, c := range r.Checks {
		holds[c.Invariant] = c.Holds
	}
	broken := func(inv string) bool { h, ok := holds[inv]; return ok && !h }

	currency := "USD"
	perOrder := map[string][]Charge{}
	var orders []string // in the order their first charge came
	var total int64
	for _, c := range r.Ledger {
		if c.Currency != "" {
			currency = c.Currency
		}
		if !c.MoneyMoved() {
			continue
		}
		o := c.Metadata["order_id"]
		if perOrder[o] == nil {
			orders = append(orders, o)
		}
		perOrder[o] = append(perOrder[o], c)
		total += c.Amount
	}
	var extra int64 // charges beyond the first of each order
	for _, cs := range perOrder {
		for _, c := range cs[1:] {
			extra += c.Amount
		}
	}
	r.Charged = Money{total, currency}
	r.Overcharged = Money{0, currency}
	switch {
	case extra > 0 || broken(ChargesPerOrder):
		r.Outcome, r.Overcharged.Amount = OutcomeDoubleCharge, extra
	case broken(OrdersPerKey) || broken(PaidOrders):
		// Every order paid beyond those the customers meant to buy is money taken for nothing.
		r.Outcome = OutcomeDuplicateOrder
		for i, o := range orders {
			if i >= paidOrders {
				r.Overcharged.Amount += perOrder[o][0].Amount
			}
		}
	case broken(ReceiptsPerPaidOrder):
		r.Outcome = OutcomeDuplicateEffect
	case broken(StatusMatchesGateway):
		r.Outcome = OutcomeStatusRegressed
	default:
		r.Outcome = OutcomeClean
	}
}

// Headline says in money what happened to the customer, e.g. "Charged twice: 2 × $39.00
// for one order". money formats an amount (the views' formatter).
func Headline(r Result, money func(int64, string) string) string {
	var moved []Charge
	for _, c := range r.Ledger {
		if c.MoneyMoved() {
			moved = append(moved, c)
		}
	}
	// charged is "2 × $28.00", or "$28.00 + €24.90" when the charges differ.
	charged := func() string {
		if len(moved) == 0 {
			return "no money moved"
		}
		var parts []string
		for _, c := range moved {
			if c.Amount != moved[0].Amount || c.Currency != moved[0].Currency {
				for _, c := range moved {
					parts = append(parts, money(c.Amount, c.Currency))
				}
				return strings.Join(parts, " + ")
			}
		}
		return fmt.Sprintf("%d × %s", len(moved), money(moved[0].Amount, moved[0].Currency))
	}
	once := func() string {
		if len(moved) == 1 {
			return money(moved[0].Amount, moved[0].Currency)
		}
		return charged()
	}
	switch r.Outcome {
	case OutcomeDoubleCharge:
		return fmt.Sprintf("Charged twice: %s for one order", charged())
	case OutcomeDuplicateOrder:
		if len(moved) == 0 {
			return "Duplicate order: two orders, no money moved"
		}
		return fmt.Sprintf("Duplicate order: %s, %s too much", charged(), money(r.Overcharged.Amount, r.Overcharged.Currency))
	case OutcomeDuplicateEffect:
		return fmt.Sprintf("Duplicate receipt: charged %s once, the receipt sent twice", once())
	case OutcomeStatusRegressed:
		return fmt.Sprintf("Status went back: charged %s, the order says otherwise", once())
	case "":
		return "No verdict: the run failed"
	}
	switch len(moved) {
	case 0:
		return "Charged nothing: no money moved"
	case 1:
		return "Charged once: " + once()
	}
	return fmt.Sprintf("Charged as bought: %s, one charge per order", charged())
}
