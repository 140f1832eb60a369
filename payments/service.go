// Package payments holds the operations that move money: one-step checkout and paying an
// order, each a sequence of atomic phases with recovery points; the gateway client; webhook
// processing; and the background work (side effects, completer, reaper) that finishes what a
// request started.
package payments

import (
	"context"
	"log/slog"

	"gorm.io/gorm"

	"checkoutlab/models"
)

// Recovery points of the checkout and payment operations. Each phase is one transaction that
// does its work AND advances the point, so after a crash the point says exactly what exists.
//
//	started          the key is ours; nothing else is written. A fresh key is not even written:
//	                 its row is inserted by the first phase's transaction. A takeover of a
//	                 released key starts afresh.
//	payment_created  the order (for checkout) and a pending payment with its derived gateway
//	                 key are committed. The gateway may or may not have been called: a resumer
//	                 first asks the gateway what happened under that key.
//	finished         the outcome (succeeded or declined) and the stored response are committed.
const (
	PointStarted        = models.RecoveryStarted
	PointPaymentCreated = "payment_created"
	PointFinished       = models.RecoveryFinished
)

// Key is what an operation needs from its idempotency key: where the operation got to, and
// writes that only apply while the key is still ours (fencing). *models.IdempotencyKey is one.
type Key interface {
	RecoveryPoint() string
	OrderID() string
	PaymentID() string
	// Transaction runs one phase: for a fresh key, the key's INSERT is its first statement.
	Transaction(db *gorm.DB, fn func(tx *gorm.DB) error) error
	AdvanceTx(tx *gorm.DB, point string) error
	LinkTx(tx *gorm.DB, orderID, paymentID string) error
	// ProgressTx is LinkTx and AdvanceTx in one UPDATE.
	ProgressTx(tx *gorm.DB, point, orderID, paymentID string) error
	CompleteTx(tx *gorm.DB, r models.Response) error
}

// Gateway is what an operation needs from the payment provider. *GatewayClient is one.
type Gateway interface {
	CreatePaymentMethod(ctx context.Context, cardNumber string) (GatewayPaymentMethod, error)
	Charge(ctx context.Context, req ChargeRequest) ChargeResult
	FindCharges(ctx context.Context, idempotencyKey string) ([]GatewayCharge, error)
}

// Outbox enqueues the side effects of a newly paid order inside the paying transaction.
// *Jobs is one.
type Outbox interface {
	EnqueueSideEffectsTx(tx *gorm.DB, order *models.Order) error
}

// Result is what an operation came to: the order and payment as they now are, and, for a
// business rejection (card declined), the error to show. The handler renders it.
type Result struct {
	Operation Operation
	Order     *models.Order
	Payment   *models.Payment
	Err       error
}

// Renderer turns a result into the response stored with the key. The request path and the
// completer render through the same function, so a client that retries after the completer
// finished its operation gets exactly the answer it would have got.
type Renderer func(out Result) (models.Response, error)

// Service runs checkout and payment operations.
type Service struct {
	DB      *gorm.DB
	Gateway Gateway
	Outbox  Outbox
	Render  Renderer
	// Crash, when set, is called at each crash point (SHOP_CRASH_AT drills).
	Crash func(point string)
	// Journal, when set, records each phase, gateway call and completer step.
	Journal Journal
	Logger  *slog.Logger
	// Protections is all on (the zero value) except in the failure lab; see Protections.
	Protections Protections
}

func (s *Service) crash(point string) {
	if s.Crash != nil {
		s.Crash(point)
	}
}

func (s *Service) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}
