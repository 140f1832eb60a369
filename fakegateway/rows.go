package fakegateway

import (
	"encoding/json"
	"time"
)

// The rows of the gateway's tables (migrations/gateway). They are internal: the API speaks the
// JSON views below, never these structs.

type paymentMethodRow struct {
	ID        string `gorm:"primaryKey"`
	Last4     string `gorm:"column:last4"`
	Brand     string
	Behaviour string
	CreatedAt time.Time
}

func (paymentMethodRow) TableName() string { return "gw_payment_methods" }

type chargeRow struct {
	ID              string `gorm:"primaryKey"`
	IdempotencyKey  string
	Amount          int64
	Currency        string
	Status          string
	FailureCode     string
	PaymentMethodID string
	Metadata        string // JSON object
	OrderID         string
	CreatedAt       time.Time
	RefundedAt      *time.Time
}

func (chargeRow) TableName() string { return "gw_charges" }

type idempotencyKeyRow struct {
	Key         string `gorm:"primaryKey;column:key"`
	Fingerprint string
	ChargeID    string
	StatusCode  int
	CreatedAt   time.Time
}

func (idempotencyKeyRow) TableName() string { return "gw_idempotency_keys" }

type faultStrikeRow struct {
	IdempotencyKey string `gorm:"primaryKey"`
	Behaviour      string
	CreatedAt      time.Time
}

func (faultStrikeRow) TableName() string { return "gw_fault_strikes" }

type faultRow struct {
	ID          int64 `gorm:"primaryKey"`
	Fault       string
	Times       int
	Remaining   int
	Probability float64
	Seed        int64
	DelayMS     int `gorm:"column:delay_ms"`
	Status      int
	Copies      int
	Code        string
	CreatedAt   time.Time
	DisarmedAt  *time.Time // set when disarmed; the row stays for the page's history
}

func (faultRow) TableName() string { return "gw_faults" }

type eventRow struct {
	ID          string `gorm:"primaryKey"`
	Type        string
	ChargeID    string
	Payload     string
	Traceparent string // of the request that made the event; its deliveries continue that trace
	CreatedAt   time.Time
}

func (eventRow) TableName() string { return "gw_events" }

type deliveryRow struct {
	ID            int64 `gorm:"primaryKey"`
	EventID       string
	Reason        string
	Status        string
	Attempts      int
	NextAttemptAt time.Time
	DeliveredAt   *time.Time
	LastError     string
	CreatedAt     time.Time
	// Lane, ClaimedBy and ClaimedUntil are the senders' bookkeeping (migration 00003): which
	// sender sends it, and who has taken it until when.
	Lane         int
	ClaimedBy    string
	ClaimedUntil *time.Time
}

func (deliveryRow) TableName() string { return "gw_deliveries" }

type attemptRow struct {
	ID         int64 `gorm:"primaryKey"`
	DeliveryID int64
	Attempt    int
	StatusCode int
	LatencyMS  int64 `gorm:"column:latency_ms"`
	Error      string
	CreatedAt  time.Time
}

func (attemptRow) TableName() string { return "gw_delivery_attempts" }

// Charge statuses in the ledger. "pending" exists only inside charge.pending events: the
// gateway decides a charge within one transaction.
const (
	statusPending   = "pending"
	statusSucceeded = "succeeded"
	statusFailed    = "failed"
	statusRefunded  = "refunded"
)

// Charge is the JSON shape of a charge, as docs/api.md ("The fake gateway") describes it.
type Charge struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Status         string            `json:"status"`
	Amount         int64             `json:"amount"`
	Currency       string            `json:"currency"`
	IdempotencyKey string            `json:"idempotency_key"`
	Metadata       map[string]string `json:"metadata"`
	Created        int64             `json:"created"`
	PaymentMethod  string            `json:"payment_method"`
	FailureCode    string            `json:"failure_code,omitempty"`
	Refunded       bool              `json:"refunded"`
}

func (r chargeRow) view() Charge {
	md := map[string]string{}
	_ = json.Unmarshal([]byte(r.Metadata), &md) // written by us from a map; cannot fail
	return Charge{
		ID:             r.ID,
		Object:         "charge",
		Status:         r.Status,
		Amount:         r.Amount,
		Currency:       r.Currency,
		IdempotencyKey: r.IdempotencyKey,
		Metadata:       md,
		Created:        r.CreatedAt.Unix(),
		PaymentMethod:  r.PaymentMethodID,
		FailureCode:    r.FailureCode,
		Refunded:       r.Status == statusRefunded,
	}
}

// PaymentMethod is the JSON shape of a payment method.
type PaymentMethod struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	Last4  string `json:"last4"`
	Brand  string `json:"brand"`
}

func (r paymentMethodRow) view() PaymentMethod {
	return PaymentMethod{ID: r.ID, Object: "payment_method", Last4: r.Last4, Brand: r.Brand}
}

// Event is the JSON body of a webhook, in the Standard Webhooks manner docs/api.md describes.
type Event struct {
	ID      string    `json:"id"`
	Type    string    `json:"type"`
	Created int64     `json:"created"`
	Data    EventData `json:"data"`
}

// EventData carries the charge as it was when the event happened.
type EventData struct {
	Charge Charge `json:"charge"`
}
