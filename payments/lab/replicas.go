package lab

// Scenarios on several shop replicas behind a load balancer. The shop is stateless — every
// guarantee lives in the database — so what a second replica does with a request must be
// exactly what the first would have done: the idempotency key, the lease and the derived
// gateway key are in the database, not in a process.

import (
	"time"

	"checkoutlab/payments"
)

// Replicas says how a scenario's shop runs on several processes.
type Replicas struct {
	N int // shop processes, each on its own listener
	// RetryPOST makes the load balancer send a POST whose replica did not answer within
	// ProxyTimeout (or whose connection broke) again to the next replica, as nginx does with
	// `proxy_next_upstream … non_idempotent` and some cloud load balancers do by default.
	RetryPOST    bool
	ProxyTimeout time.Duration
	// Postgres runs the scenario on PostgreSQL only; SkipReason says why it cannot run on the
	// embedded SQLite database.
	Postgres   bool
	SkipReason string
}

var replicaScenarios = []Scenario{
	{
		Name: "lb_retries_post", Title: "The load balancer retries the POST on another replica",
		RealLife:  "The first replica has charged the card and is slow to answer; the load balancer gives up on it and sends the same POST to the next replica, while the first is still working.",
		Mechanism: "The idempotency key lives in the database, not in a replica: the second replica finds it in progress (409, retry) and later replays the first replica's answer. Without server idempotency the second replica places a second order and charges the card again.",
		Switch:    payments.SwitchServerIdempotency, Breaks: PaidOrders, PaidOrders: 1,
		Replicas: &Replicas{N: 2, RetryPOST: true, ProxyTimeout: 400 * time.Millisecond},
		Links:    []string{"cmd/shop/internal/labrun/proxy.go", "handlers/idempotency.go", "docs/lab.md"},
		Steps: []Step{
			fault("commit_then_delay", "delay_ms", 700), // charged, then slow: past the proxy's timeout, within the shop's
			checkout(Checkout{Key: "lb-retry", Retry: true}),
		},
	},
	{
		Name: "replica_dies_after_charge", Title: "A replica dies after the charge; the retry lands on another",
		RealLife:  "The replica that charged the card is killed before it wrote the answer down. The client's retry reaches another replica, which knows nothing of the first one's process.",
		Mechanism: "The derived gateway key, recorded in the database before the call: the other replica (or the completer) resumes the operation once the dead owner's lease has run out, asks the gateway under <payment id>:charge, finds the charge and records it. With a fresh key per attempt it charges again.",
		Switch:    payments.SwitchDerivedGatewayKey, Breaks: ChargesPerOrder, PaidOrders: 1,
		CrashAt:  payments.CrashAfterGatewayCharge,
		Replicas: &Replicas{N: 2},
		Links:    []string{"payments/operations.go", "cmd/shop/internal/labrun/replicas.go", "docs/lab.md"},
		// The webhook is late: the shop must find out from the gateway's ledger.
		Steps: append([]Step{fault("webhook_delay", "delay_ms", 5000)}, crashSteps("replica-died")...),
	},
}
