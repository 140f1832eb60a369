package lab

// A chaos run as data: its options, its schedule, its progress and its judged result.
// `shop lab chaos` (cmd/shop/internal/chaos) makes the runs; the /lab/chaos pages show them.

import (
	"fmt"
	"time"

	"checkoutlab/payments"
)

// ChaosOptions are a run's flags. Every one of them, the seed first, shapes the schedule.
type ChaosOptions struct {
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
	ChaosDefaultPurchases = 200
	ChaosDefaultClients   = 8
	ChaosDefaultReplicas  = 3
)

// Check refuses options no run can have.
func (o ChaosOptions) Check() error {
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
	ChaosActionFault        = "fault"         // arm a gateway fault (it strikes the next charge)
	ChaosActionKill         = "kill"          // SIGKILL a replica, then start it again
	ChaosActionCrashPoint   = "crash_point"   // restart a replica with SHOP_CRASH_AT: it dies there
	ChaosActionDoubleSubmit = "double_submit" // the purchase is sent twice at once (a double click)
	ChaosActionDeclineCard  = "decline_card"  // the purchase pays with a card that is declined
)

// ChaosEvent is one strike of the schedule, made just before purchase Purchase (counted from 0)
// starts.
type ChaosEvent struct {
	Purchase int    `json:"purchase"`
	Action   string `json:"action"`
	Fault    string `json:"fault,omitempty"`
	DelayMS  int    `json:"delay_ms,omitempty"`
	Times    int    `json:"times,omitempty"`
	Copies   int    `json:"copies,omitempty"`
	Replica  int    `json:"replica,omitempty"` // counted from 1
	CrashAt  string `json:"crash_at,omitempty"`
}

// ChaosLine is one line of a purchase's cart.
type ChaosLine struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// ChaosProgress is how far a run has come; the page shows it while the run goes on.
type ChaosProgress struct {
	Phase    string `json:"phase"` // starting, purchasing, settling, judging, done
	Done     int    `json:"done"`  // purchases finished
	Total    int    `json:"total"`
	Answered int    `json:"answered"`
	GaveUp   int    `json:"gave_up"`
	Faults   int    `json:"faults"` // gateway faults armed
	Kills    int    `json:"kills"`  // replica processes killed (SIGKILL), by the lab or at a crash point
}

// ChaosMark is something done to the stack during the run, for the chart.
type ChaosMark struct {
	AtMS    int64  `json:"at_ms"`
	Kind    string `json:"kind"` // fault, kill, crash
	Label   string `json:"label"`
	Replica int    `json:"replica,omitempty"`
}

// ChaosPoint is one finished purchase, for the chart.
type ChaosPoint struct {
	AtMS    int64  `json:"at_ms"`
	Outcome string `json:"outcome"`
}

// ChaosWorst is one of the purchases that went worst, with its order for its timeline.
type ChaosWorst struct {
	Purchase int    `json:"purchase"`
	Tenant   string `json:"tenant"`
	OrderID  string `json:"order_id"`
	Why      string `json:"why"`
	// Timeline is the order's journal, read before the run's stack went away.
	Timeline []Row `json:"timeline,omitempty"`
}

// ChaosResult is a judged chaos run. Its JSON is `shop lab chaos --json`'s.
type ChaosResult struct {
	Seed      int64           `json:"seed"`
	Purchases int             `json:"purchases"`
	Clients   int             `json:"clients"`
	Replicas  int             `json:"replicas"`
	Off       payments.Switch `json:"off"`
	Database  string          `json:"database"`

	Answered int `json:"answered"`
	GaveUp   int `json:"gave_up"`
	Declined int `json:"declined"`
	// DoubleCharges counts the succeeded charges beyond the first on one order.
	DoubleCharges int `json:"double_charges"`
	// DuplicateOrders counts the paid orders beyond the first of one purchase.
	DuplicateOrders int `json:"duplicate_orders"`
	// Lost counts succeeded charges whose order is not paid, and paid orders with no charge.
	Lost              int `json:"lost"`
	DuplicateReceipts int `json:"duplicate_receipts"`
	StatusRegressed   int `json:"status_regressed"`
	// SuspectedDuplicates is how many suspected duplicate purchases the reconciliation report
	// lists (one customer, the same lines, paid twice under different keys).
	SuspectedDuplicates int     `json:"suspected_duplicate_purchases"`
	Overcharged         []Money `json:"overcharged"`
	Kills               int     `json:"kills"`
	Faults              int     `json:"faults"`
	ProxyRetries        int64   `json:"proxy_retries"`

	Schedule   []ChaosEvent `json:"schedule"`
	Invariants []Check      `json:"invariants"`
	Verdict    string       `json:"verdict"`
	OK         bool         `json:"ok"`

	Worst     []ChaosWorst `json:"worst"`
	Points    []ChaosPoint `json:"points"`
	Marks     []ChaosMark  `json:"marks"`
	Unsettled string       `json:"unsettled,omitempty"`
	// Problems are strikes the lab could not make (a replica that would not start again).
	Problems []string      `json:"problems,omitempty"`
	Took     time.Duration `json:"took_ns"`
}

// Outcomes of a purchase, as its customer saw them.
const (
	ChaosOutcomePaid     = "paid"     // 201
	ChaosOutcomeDeclined = "declined" // 402
	ChaosOutcomeRejected = "rejected" // another final answer (out of stock, say)
	ChaosOutcomeGaveUp   = "gave_up"  // no final answer after every attempt
)
