// Package lab is the failure lab's catalogue: scenarios as data, the invariants a run is
// judged by, and the verdict. A scenario is run twice by a runner (cmd/shop/internal/labrun): once
// with every protection on, where every invariant must hold, and once with the one protection
// it is about turned off, where the invariant it is about must break. The second run proves
// that the switch really removes the mechanism, in the same code path: it is not a simulation.
package lab

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"checkoutlab/payments"
)

// Invariants, each checked from the gateway's ledger (where money moved) and the shop's own
// views of its orders (GET /api/v1/orders) after the run's background work has settled. The
// first five each say that something did not happen too often — the harms a missing
// protection causes, and what an unprotected run must show. The last says that what the
// customers meant to do did happen; a protected run must hold it too, so a run where work
// simply went missing can never pass as "prevented".
const (
	// ChargesPerOrder: no order has more than one succeeded charge at the gateway.
	ChargesPerOrder = "charges_per_order"
	// OrdersPerKey: the answers under one idempotency key (of one tenant) name one order.
	OrdersPerKey = "orders_per_key"
	// PaidOrders: no more orders are paid than the customers meant to buy.
	PaidOrders = "paid_orders"
	// ReceiptsPerPaidOrder: no paid order has more than one receipt in the mailbox.
	ReceiptsPerPaidOrder = "receipts_per_paid_order"
	// StatusMatchesGateway: no payment whose charge succeeded at the gateway shows another
	// status (a status that moved back, or never moved).
	StatusMatchesGateway = "status_matches_gateway"
	// PurchasesComplete: at least as many orders are paid as the customers meant to buy, and
	// every paid order has its receipt.
	PurchasesComplete = "purchases_complete"
)

// Invariants lists them in the order a report shows them.
var Invariants = []string{ChargesPerOrder, OrdersPerKey, PaidOrders, ReceiptsPerPaidOrder, StatusMatchesGateway, PurchasesComplete}

// Invariants of a repair: a scenario whose steps include an operator's triage action lists
// them in Scenario.Repair, and they must hold in both modes — the repair works whether or not
// there was anything to repair.
const (
	// KeepsOneCharge: every paid order of the run keeps exactly one succeeded, unrefunded
	// charge: the extra ones were refunded, and no click refunded the one the order keeps.
	KeepsOneCharge = "keeps_one_charge"
	// ReconciliationClean: the reconciliation report names none of the run's orders, except
	// as a suspected duplicate purchase (for review, not a failure).
	ReconciliationClean = "reconciliation_clean"
)

// Scenario is one failure, told and runnable.
type Scenario struct {
	Name      string // the CLI's name for it
	Title     string
	Family    string // FamilyClient … FamilyBoundaries: where the catalogue groups it
	RealLife  string // what happens in real life
	Mechanism string // what stops it
	// Switch is the protection the unprotected run turns off.
	Switch payments.Switch
	// Breaks is the invariant the unprotected run must break. "" for a boundary scenario
	// whose outcome must be right both ways (e.g. a new purchase must go through).
	Breaks string
	// PaidOrders is how many orders the customers meant to buy and pay.
	PaidOrders int
	Links      []string // code and docs, relative to the repository root
	// CrashAt, when set, runs the shop as a child process that kills itself (SIGKILL) the
	// first time an operation reaches this crash point (payments.CrashPoints); a Restart step
	// starts it again without one.
	CrashAt string
	// Replicas, when set, runs the scenario on several shop processes behind a load
	// balancer (replicas.go); CrashAt then applies to the first replica.
	Replicas *Replicas
	// Repair lists the invariants an operator's repair must hold, in both modes (see
	// KeepsOneCharge). The runner checks them besides Invariants.
	Repair []string
	Steps  []Step
}

// Step is one thing the lab's client or the trainer does. Exactly one field is set.
type Step struct {
	Fault    map[string]any // arm a gateway fault (POST /_control/faults)
	Checkout *Checkout      // POST /api/v1/checkout, or the storefront's checkout form
	Wait     time.Duration
	// Restart waits until the shop has died at the scenario's crash point, then starts it
	// again on the same database, without the crash point.
	Restart bool
	// ExpireKeys fast-forwards past the keys' retention: the reaper (the real one, the job
	// periodic job, whose interval follows the retention) deletes every completed key now.
	ExpireKeys bool
	// Triage is an operator's action on the reconciliation desk.
	Triage *Triage
}

// Triage is an operator's action on a reconciliation finding: POST
// /api/v1/reconciliation/actions with the tenant's API key, on the order an earlier Checkout
// step's key was answered with. Copies are sent at once, each under its own Idempotency-Key
// (two clicks from two pages, or two operators): only the action's own idempotency toward the
// gateway keeps them to one refund. Each answer goes into the run's timeline; the judge reads
// the outcome from the ledger and the report, not from the answers.
type Triage struct {
	Tenant  string // "acme" unless set
	Action  string // check_now, refund_extra_charge, settle_stuck, dismiss_duplicate
	OrderOf string // the Key of the Checkout step whose order it acts on
	Reason  string // "lab: " + Action unless set
	Copies  int    // 0 means 1
}

// Checkout is a one-step checkout sent by the lab's client.
type Checkout struct {
	Tenant string // "acme" unless set
	Key    string // the Idempotency-Key
	Card   string // 4242 4242 4242 4242 unless set
	Cart   string // "" two camp mugs; "compass" one brass compass; "beans" globex's espresso beans
	Copies int    // identical requests sent at once; 0 means 1
	// Retry makes the client retry a 5xx, a lost answer or a 409 in progress until it gets a
	// final answer, with the same key: unless the client_same_key switch is off, when it
	// makes a new key per retry.
	Retry bool
	// Browser checks out through the storefront, as checkout.js does: a session with a cart,
	// and the checkout form posted with the key in the Idempotency-Key header. A Browser step
	// after another one is the same tab: same session, same cart, same form.
	Browser bool
	// Expect, if set, is the error code the last answer must carry; the run fails otherwise.
	// A boundary scenario uses it to show what protects it (e.g. cart_already_converted).
	Expect string
}

const (
	cardOK            = "4242424242424242"
	cardCommitDrop    = "4000000000000119" // charged, then the connection drops
	cardDuplicateHook = "4000000000000770" // every webhook delivered three times
	cardReorderHooks  = "4000000000000788" // charge.succeeded delivered before charge.pending
	cardDeclined      = "4000000000000002"
)

func fault(name string, params ...any) Step {
	f := map[string]any{"fault": name}
	for i := 0; i+1 < len(params); i += 2 {
		f[params[i].(string)] = params[i+1]
	}
	return Step{Fault: f}
}

func checkout(c Checkout) Step { return Step{Checkout: &c} }

// Families group the catalogue by where a failure comes from.
const (
	FamilyClient      = "client"      // what a client sends and what it never hears back
	FamilyConcurrency = "concurrency" // several requests on one key at once
	FamilyCrash       = "crash"       // the shop process dies mid-operation
	FamilyWebhooks    = "webhooks"    // the gateway's deliveries: repeated, reordered, early
	FamilyBoundaries  = "boundaries"  // what a protection must not stop, and where it ends
)

// Families lists them in the catalogue's order, each with its heading.
var Families = []struct{ Name, Title string }{
	{FamilyClient, "The client: lost answers and retries"},
	{FamilyConcurrency, "Concurrency: many requests, one key"},
	{FamilyCrash, "Crashes: the process dies mid-operation"},
	{FamilyWebhooks, "Webhooks: at least once, in any order"},
	{FamilyBoundaries, "Boundaries: what must still go through"},
}

// Scenarios is the catalogue, in teaching order.
// The replica scenarios (replicas.go) come last.
var Scenarios = append([]Scenario{
	{
		Name: "double_click", Title: "Double click on Pay", Family: FamilyConcurrency,
		RealLife:  "The customer clicks Pay twice; the browser sends two identical requests with the same key, a few milliseconds apart.",
		Mechanism: "Server-side idempotency: the second request finds the key (in progress: 409, retry; completed: the stored answer replayed) and never runs the operation.",
		Switch:    payments.SwitchServerIdempotency, Breaks: OrdersPerKey, PaidOrders: 1,
		Links: []string{"handlers/idempotency/middleware.go", "models/idempotency.go", "docs/idempotency.md"},
		// The copies leave together (the client's start barrier); a slow gateway keeps the
		// first one's operation open until the second has arrived, on any machine.
		Steps: []Step{fault("latency", "delay_ms", 500), checkout(Checkout{Key: "double-click", Copies: 2, Retry: true})},
	},
	{
		Name: "twenty_concurrent", Title: "Twenty concurrent requests on one key", Family: FamilyConcurrency,
		RealLife:  "A retrying client, a proxy and an impatient customer send the same checkout twenty times at once.",
		Mechanism: "An atomic reservation: one INSERT … ON CONFLICT DO NOTHING with an in-progress state; exactly one request owns the key, the others get 409 and later the stored answer.",
		Switch:    payments.SwitchAtomicReservation, Breaks: PaidOrders, PaidOrders: 1,
		Links: []string{"models/idempotency.go", "docs/idempotency.md"},
		Steps: []Step{fault("latency", "delay_ms", 500), checkout(Checkout{Key: "twenty", Copies: 20, Retry: true})},
	},
	{
		Name: "lost_response", Title: "Lost response after the charge", Family: FamilyClient,
		RealLife:  "The gateway charges the card, then the connection drops before its answer reaches the shop. The shop cannot tell a charge from no charge; the client retries.",
		Mechanism: "The gateway key is derived from the payment (<payment id>:charge) and recorded before the call; a resumed attempt asks the gateway what happened under it and charges only if nothing is there.",
		Switch:    payments.SwitchDerivedGatewayKey, Breaks: ChargesPerOrder, PaidOrders: 1,
		Links: []string{"payments/operations.go", "models/payments.go", "docs/failure-modes.md"},
		Steps: []Step{
			fault("webhook_delay", "delay_ms", 2000), // the retry comes before the webhook
			checkout(Checkout{Key: "lost-response", Card: cardCommitDrop, Retry: true}),
		},
	},
	{
		Name: "timeout_after_charge", Title: "Timeout after the charge", Family: FamilyClient,
		RealLife:  "The gateway commits the charge but answers after the shop's timeout. The shop gives up waiting, the client retries.",
		Mechanism: "The same derived gateway key: the retry's lookup finds the charge and records it; the gateway would also replay it under that key.",
		Switch:    payments.SwitchDerivedGatewayKey, Breaks: ChargesPerOrder, PaidOrders: 1,
		Links: []string{"payments/operations.go", "payments/gateway.go", "docs/failure-modes.md"},
		Steps: []Step{
			fault("commit_then_delay", "delay_ms", 1500), // longer than the lab's 1s gateway timeout
			fault("webhook_delay", "delay_ms", 2000),
			checkout(Checkout{Key: "timeout", Retry: true}),
		},
	},
	{
		Name: "same_key_different_cart", Title: "Same key, different cart", Family: FamilyClient,
		RealLife:  "A buggy client reuses its idempotency key for a new, different cart.",
		Mechanism: "The key's fingerprint: a request whose significant parameters differ is refused with 422 idempotency_key_reuse and runs nothing.",
		Switch:    payments.SwitchServerIdempotency, Breaks: OrdersPerKey, PaidOrders: 1,
		Links: []string{"handlers/requests.go", "handlers/idempotency/middleware.go", "docs/idempotency.md"},
		Steps: []Step{
			checkout(Checkout{Key: "reused", Retry: true}),
			checkout(Checkout{Key: "reused", Cart: "compass", Retry: true}),
		},
	},
	{
		Name: "crash_after_key_reserved", Title: "Process crash after the key is reserved", Family: FamilyCrash,
		RealLife:  "The shop process dies (an OOM kill, a deploy, a lost machine) just after it reserved the key, before it wrote anything else. The client's connection drops; it retries.",
		Mechanism: "The folded reservation: a fresh key's row is inserted by the first phase's transaction, so a crash before it leaves nothing at all — no key, no order. The retry finds the key absent and runs the operation from the beginning, at once. Without server idempotency the retry also just runs as new: harmless here, because nothing had happened yet. That is the boundary.",
		Switch:    payments.SwitchServerIdempotency, Breaks: "", PaidOrders: 1,
		CrashAt: payments.CrashAfterKeyReserved,
		Links:   []string{"models/idempotency.go", "payments/crash.go", "docs/failure-modes.md"},
		Steps:   crashSteps("crash-reserved"),
	},
	{
		Name: "crash_after_order_created", Title: "Process crash after the order is created", Family: FamilyCrash,
		RealLife:  "The shop dies after it committed the order and its pending payment, before it called the gateway. The client retries.",
		Mechanism: "The recovery point: the order, the pending payment and payment_created commit together, linked to the key. Once the dead owner's lease has run out, the completer (or the retry, whichever comes first) resumes there: it asks the gateway and charges once; the retry gets that order. Without server idempotency nothing remembers the first attempt: the retry places a second order and pays it, and the first order is never charged — it stays unpaid, holding its stock, until it expires. No double charge, because the crash came before the charge: that is the boundary (crash_before_response is the one that charges twice).",
		Switch:    payments.SwitchServerIdempotency, Breaks: "", PaidOrders: 1,
		CrashAt: payments.CrashAfterOrderCreated,
		Links:   []string{"payments/operations.go", "payments/completer.go", "docs/idempotency.md"},
		Steps:   crashSteps("crash-order"),
	},
	{
		Name: "crash_after_gateway_charge", Title: "Process crash after the gateway charged", Family: FamilyCrash,
		RealLife:  "The gateway charged the card and answered, and the shop died before it wrote the answer down. Only the gateway knows the money moved.",
		Mechanism: "The derived gateway key, recorded before the call: the operation, resumed after the lease by the completer or the retry, asks the gateway under <payment id>:charge, finds the charge and records it. With a fresh key per attempt, the lookup finds nothing and the card is charged again.",
		Switch:    payments.SwitchDerivedGatewayKey, Breaks: ChargesPerOrder, PaidOrders: 1,
		CrashAt: payments.CrashAfterGatewayCharge,
		Links:   []string{"payments/operations.go", "payments/gateway.go", "docs/failure-modes.md"},
		// The webhook is late: the shop (the completer, or the retry) must find out what
		// happened from the gateway's ledger, not from the webhook.
		Steps: append([]Step{fault("webhook_delay", "delay_ms", 5000)}, crashSteps("crash-charged")...),
	},
	{
		Name: "crash_before_response", Title: "Process crash before the response", Family: FamilyCrash,
		RealLife:  "Everything is committed — the payment, the stored answer — and the shop dies before it writes the response. The client saw nothing and retries.",
		Mechanism: "The stored response: the retry finds the key completed and gets the answer replayed, byte for byte; nothing runs again. Without server idempotency the retry is a new checkout and the customer pays twice.",
		Switch:    payments.SwitchServerIdempotency, Breaks: PaidOrders, PaidOrders: 1,
		CrashAt: payments.CrashBeforeResponse,
		Links:   []string{"handlers/idempotency/middleware.go", "payments/operations.go", "docs/idempotency.md"},
		Steps:   crashSteps("crash-answered"),
	},
	{
		Name: "duplicate_webhook", Title: "Duplicate webhook", Family: FamilyWebhooks,
		RealLife:  "The gateway delivers charge.succeeded three times (at-least-once delivery).",
		Mechanism: "Webhook dedupe: the event id is recorded in the transaction that applies it; side effects are enqueued only by the writer that moved the payment, and the mailbox dedupes by order.",
		Switch:    payments.SwitchWebhookDedupe, Breaks: ReceiptsPerPaidOrder, PaidOrders: 1,
		Links: []string{"payments/webhooks.go", "payments/side_effects.go", "models/side_effects.go"},
		Steps: []Step{checkout(Checkout{Key: "dup-webhook", Card: cardDuplicateHook, Retry: true})},
	},
	{
		Name: "out_of_order_webhooks", Title: "Out-of-order webhooks", Family: FamilyWebhooks,
		RealLife:  "charge.succeeded arrives before charge.pending, which comes late.",
		Mechanism: "Monotonic status: every settle is a conditional UPDATE from allowed predecessors only, so a late event cannot move a paid order back.",
		Switch:    payments.SwitchMonotonicStatus, Breaks: StatusMatchesGateway, PaidOrders: 1,
		Links: []string{"models/payments.go", "payments/webhooks.go", "docs/failure-modes.md"},
		Steps: []Step{
			fault("webhook_delay", "delay_ms", 500), // both events arrive after the answer
			checkout(Checkout{Key: "reordered", Card: cardReorderHooks, Retry: true}),
		},
	},
	{
		Name: "webhook_before_response", Title: "Webhook before the response", Family: FamilyWebhooks,
		RealLife:  "The gateway commits the charge and sends its webhook at once, but its HTTP answer to the shop is slow: the webhook marks the order paid while the checkout request is still waiting for the gateway.",
		Mechanism: "Two writers, one payment: the webhook and the response both settle it with the same conditional UPDATE, and only the writer that moved the payment enqueues the receipt. The response path finds it already paid and only stores the answer. Without that rule (and the dedupe behind it) both enqueue, and the customer gets two receipts and two parcels.",
		Switch:    payments.SwitchWebhookDedupe, Breaks: ReceiptsPerPaidOrder, PaidOrders: 1,
		Links: []string{"payments/operations.go", "payments/webhooks.go", "models/payments.go"},
		Steps: []Step{
			fault("commit_then_delay", "delay_ms", 700), // slow, but within the lab's 1s gateway timeout
			checkout(Checkout{Key: "webhook-first", Retry: true}),
		},
	},
	{
		Name: "client_gone", Title: "Webhook only, client gone", Family: FamilyClient,
		RealLife:  "The customer pays and closes the tab. The gateway charged, its answer to the shop was lost, and no client will ever retry. The webhook comes late, as webhooks do.",
		Mechanism: "The shop finishes on its own. The completer takes over the abandoned operation once its lease has run out, asks the gateway under the derived key <payment id>:charge, finds the charge and settles the order; the late webhook then changes nothing. With a fresh gateway key the completer finds nothing and charges the card again, with no client involved at all.",
		Switch:    payments.SwitchDerivedGatewayKey, Breaks: ChargesPerOrder, PaidOrders: 1,
		Links: []string{"payments/completer.go", "payments/operations.go", "payments/webhooks.go"},
		Steps: []Step{
			fault("commit_then_drop"),
			fault("webhook_delay", "delay_ms", 6000), // well after the completer (one 2s lease)
			checkout(Checkout{Key: "gone"}),          // no retry: the tab is closed
		},
	},
	{
		Name: "client_new_key_per_retry", Title: "Client makes a new key per retry", Family: FamilyClient,
		RealLife:  "The answer is lost after the charge; the client retries, but generates a fresh Idempotency-Key for the retry.",
		Mechanism: "The client's half of the contract: one key per operation, sent again on every retry. With a new key the server rightly sees a new purchase.",
		Switch:    payments.SwitchClientSameKey, Breaks: PaidOrders, PaidOrders: 1,
		Links: []string{"docs/idempotency.md", "docs/api.md"},
		Steps: []Step{
			fault("commit_then_drop"),
			fault("webhook_delay", "delay_ms", 2000),
			checkout(Checkout{Key: "client-retry", Retry: true}),
		},
	},
	{
		Name: "new_purchase", Title: "A new purchase of the same items", Family: FamilyBoundaries,
		RealLife:  "The customer really wants a second set of mugs and checks out again, with a new key.",
		Mechanism: "Nothing must stop it: deduplication is by key, never by content. Two orders, two charges, protected or not.",
		Switch:    payments.SwitchServerIdempotency, Breaks: "", PaidOrders: 2,
		Links: []string{"docs/idempotency.md"},
		Steps: []Step{
			checkout(Checkout{Key: "purchase-1", Retry: true}),
			checkout(Checkout{Key: "purchase-2", Retry: true}),
		},
	},
	{
		Name: "retry_after_retention", Title: "A retry after the key's retention", Family: FamilyBoundaries,
		RealLife:  "A tab left open for days submits the same checkout again, with the same key, after the shop has deleted the key: completed keys are kept for 24 hours, then reaped.",
		Mechanism: "Past its retention a key protects nothing: the shop has forgotten it and sees a new request. What still protects this checkout is business state: the cart became an order, so a second checkout of it is refused (409 cart_already_converted). An API client has no cart and no such guard, which is why retention must outlast every client's retries.",
		Switch:    payments.SwitchServerIdempotency, Breaks: "", PaidOrders: 1,
		Links: []string{"payments/reaper.go", "handlers/shop_payment.go", "docs/idempotency.md"},
		Steps: []Step{
			checkout(Checkout{Key: "old-tab", Browser: true, Retry: true}),
			{ExpireKeys: true},
			checkout(Checkout{Key: "old-tab", Browser: true, Retry: true, Expect: "cart_already_converted"}),
		},
	},
	{
		Name: "other_tenant_same_key", Title: "The same key from another tenant", Family: FamilyBoundaries,
		RealLife:  "Two merchants' clients happen to send the same Idempotency-Key string.",
		Mechanism: "Keys are scoped to the tenant (UNIQUE (tenant_id, key)): two separate operations, neither sees the other's answer.",
		Switch:    payments.SwitchServerIdempotency, Breaks: "", PaidOrders: 2,
		Links: []string{"models/idempotency.go", "migrations/shop/postgres/00002_idempotency_keys.sql"},
		Steps: []Step{
			checkout(Checkout{Key: "shared-key", Retry: true}),
			checkout(Checkout{Tenant: "globex", Key: "shared-key", Cart: "beans", Retry: true}),
		},
	},
	{
		Name: "gateway_5xx_before_charge", Title: "Gateway 5xx before the charge", Family: FamilyBoundaries,
		RealLife:  "The gateway answers 503 before doing anything; the client retries.",
		Mechanism: "The gateway's promise (503: nothing was processed) and the released key: the retry charges once. Even a fresh gateway key cannot double-charge here — the boundary of that protection.",
		Switch:    payments.SwitchDerivedGatewayKey, Breaks: "", PaidOrders: 1,
		Links: []string{"payments/gateway.go", "docs/failure-modes.md"},
		Steps: []Step{
			fault("error_before_commit"),
			checkout(Checkout{Key: "gateway-503", Retry: true}),
		},
	},
	{
		Name: "decline_replayed", Title: "Decline replayed", Family: FamilyClient,
		RealLife:  "The card is declined; the client retries the same request.",
		Mechanism: "A decline is a business outcome: stored with the key and replayed (402), the card is not tried again. Without server idempotency the retry places a second order and tries the card again; it is declined again, so no money moves, but the customer now has two failed orders.",
		Switch:    payments.SwitchServerIdempotency, Breaks: OrdersPerKey, PaidOrders: 0,
		Links: []string{"handlers/idempotency/disposition.go", "payments/operations.go"},
		Steps: []Step{
			checkout(Checkout{Key: "declined", Card: cardDeclined, Retry: true}),
			checkout(Checkout{Key: "declined", Card: cardDeclined, Retry: true}),
		},
	},
	{
		Name: "repair_double_charge", Title: "Repair a double charge", Family: FamilyClient,
		RealLife: "The gateway charged, the answer was lost, and the retry of a shop that makes up its gateway key per attempt charged the card again. " +
			"An operator finds the double charge on the reconciliation page and clicks Refund — twice, quickly, while a colleague clicks too.",
		Mechanism: "The repair is idempotent too. The desk asks the gateway what it holds now, refunds the newest succeeded charge beyond the one the order keeps, " +
			"under a key derived from the order and that charge (<order id>:refund:<charge id>), and records the decision in the order's journal. " +
			"Two clicks refund once: the order keeps its charge, stays paid, and reconciliation is clean. " +
			"With the derived charge key there is nothing to repair, and the desk refuses the refund (409 action_not_allowed).",
		Switch: payments.SwitchDerivedGatewayKey, Breaks: ChargesPerOrder, PaidOrders: 1,
		Repair: []string{KeepsOneCharge, ReconciliationClean},
		Links:  []string{"payments/triage.go", "handlers/reconciliation_actions.go", "docs/failure-modes.md"},
		Steps: []Step{
			fault("commit_then_drop"),
			fault("webhook_delay", "delay_ms", 2000), // the retry comes before the webhook
			checkout(Checkout{Key: "repair", Retry: true}),
			{Triage: &Triage{Action: "refund_extra_charge", OrderOf: "repair", Copies: 2}},
		},
	},
}, replicaScenarios...)

// crashSteps are the steps of a crash scenario: a checkout whose connection dies with the
// shop, a restart, and the client's retry with the same key. The retry waits (409, in
// progress) until the dead owner's lease has run out; by then the completer has often
// resumed the operation, and the retry gets its stored answer.
func crashSteps(key string) []Step {
	return []Step{
		checkout(Checkout{Key: key}), // no answer: the shop dies mid-request
		{Restart: true},
		checkout(Checkout{Key: key, Retry: true}),
	}
}

// Find returns the scenario called name.
func Find(name string) (Scenario, bool) {
	for _, s := range Scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// Mode says how a scenario is run.
type Mode string

const (
	Protected   Mode = "protected"   // every protection on
	Unprotected Mode = "unprotected" // the scenario's Switch off
)

// Judge sets the verdict of r for s: a protected run must hold every invariant; an
// unprotected run must break s.Breaks (or, for a boundary scenario, hold every invariant).
func Judge(s Scenario, r *Result) {
	var broken, repairBroken []string
	checked := map[string]bool{}
	for _, c := range r.Checks {
		checked[c.Invariant] = true
		switch {
		case c.Holds:
		case slices.Contains(s.Repair, c.Invariant):
			repairBroken = append(repairBroken, c.Invariant)
		default:
			broken = append(broken, c.Invariant)
		}
	}
	for _, inv := range s.Repair {
		if !checked[inv] {
			repairBroken = append(repairBroken, inv+" (not checked)")
		}
	}
	switch {
	case r.Err != "":
		r.OK, r.Verdict = false, "the run failed: "+r.Err
	case len(repairBroken) > 0:
		r.OK, r.Verdict = false, "the repair did not hold: "+strings.Join(repairBroken, ", ")
	case r.Mode == Protected && len(broken) == 0 && s.Breaks == "":
		r.OK, r.Verdict = true, "as it should be: every invariant holds"
	case r.Mode == Protected && len(broken) == 0:
		r.OK, r.Verdict = true, "prevented: every invariant holds"
	case r.Mode == Protected:
		r.OK, r.Verdict = false, "BUG: a protected run broke "+strings.Join(broken, ", ")
	case s.Breaks == "" && len(broken) == 0:
		r.OK, r.Verdict = true, fmt.Sprintf("holds without %s too: this is the protection's boundary", s.Switch)
	case s.Breaks == "":
		r.OK, r.Verdict = false, "unexpected: broke "+strings.Join(broken, ", ")+" without "+string(s.Switch)
	case slices.Contains(broken, s.Breaks):
		r.OK, r.Verdict = true, fmt.Sprintf("reproduced: without %s, %s breaks", s.Switch, s.Breaks)
	default:
		r.OK, r.Verdict = false, fmt.Sprintf("NOT reproduced: %s held without %s", s.Breaks, s.Switch)
	}
}
