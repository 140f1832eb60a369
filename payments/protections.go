package payments

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"checkoutlab/models"
)

// Switch names one protection mechanism of the checkout. The failure lab turns exactly one
// of them off to show the failure it prevents; see Protections.
type Switch string

// The protections, each one mechanism in the real code path. SwitchClientSameKey is not a
// server mechanism: it is the client's habit of retrying with the same key, which the lab
// runner's client drops (a new key per retry) while the server keeps every protection.
const (
	// ServerIdempotency: the idempotent routes remember keys and their answers.
	SwitchServerIdempotency Switch = "server_idempotency"
	// AtomicReservation: a key is reserved with one INSERT … ON CONFLICT in an in-progress
	// state, so two requests cannot both own it.
	SwitchAtomicReservation Switch = "atomic_reservation"
	// DerivedGatewayKey: every charge attempt of a payment uses "<payment id>:charge", and a
	// resumed attempt asks the gateway what happened under it first.
	SwitchDerivedGatewayKey Switch = "derived_gateway_key"
	// WebhookDedupe: a webhook event id is applied once; side effects are enqueued once and
	// deduplicated again by the receiving side.
	SwitchWebhookDedupe Switch = "webhook_dedupe"
	// MonotonicStatus: a payment's and an order's status only move forward.
	SwitchMonotonicStatus Switch = "monotonic_status"
	// ClientSameKey: the client retries with the same Idempotency-Key (client side only).
	SwitchClientSameKey Switch = "client_same_key"
)

// Switches lists every switch, server ones first.
var Switches = []Switch{SwitchServerIdempotency, SwitchAtomicReservation, SwitchDerivedGatewayKey,
	SwitchWebhookDedupe, SwitchMonotonicStatus, SwitchClientSameKey}

// Protections says which protection mechanisms are on. The zero value has every one on, which
// is what production always runs: `go run ./cmd/shop` has no way to turn one off. Only the
// failure lab's own commands build a stack with Off set, to show what that one mechanism
// prevents, and such a stack says so loudly in its log.
type Protections struct {
	// Off is the one mechanism turned off ("" for none).
	Off Switch
}

// On reports whether the mechanism s is on.
func (p Protections) On(s Switch) bool { return p.Off != s }

// settleTx settles a payment forward-only (models.SettlePaymentTx), or, with monotonic_status
// off, overwrites its status whatever it is (the failure lab only).
func (p Protections) settleTx(tx *gorm.DB, paymentID, status, chargeID, declineCode string) (*models.PaymentTransition, error) {
	if p.On(SwitchMonotonicStatus) {
		return models.SettlePaymentTx(tx, paymentID, status, chargeID, declineCode)
	}
	return models.OverwritePaymentStatusTx(tx, paymentID, status, chargeID, declineCode)
}

// Check fails for an unknown switch name.
func (p Protections) Check() error {
	if p.Off == "" {
		return nil
	}
	for _, s := range Switches {
		if s == p.Off {
			return nil
		}
	}
	return fmt.Errorf("unknown protection switch %q", p.Off)
}

// KeyReserver is how the idempotency middleware reserves keys.
type KeyReserver interface {
	Reserve(ctx context.Context, req models.ReserveRequest) (*models.Reservation, error)
}

// Reserver is how a stack's idempotency middleware reserves keys: the store's one atomic
// INSERT … ON CONFLICT (Reserve); with server_idempotency off, under a fresh key each time,
// so nothing is remembered; with atomic_reservation off, by checking first and inserting at
// the end (models/idempotency_lab.go).
func (p Protections) Reserver(keys *models.IdempotencyStore) KeyReserver {
	switch p.Off {
	case SwitchServerIdempotency:
		return models.ForgetfulReservations{Store: keys}
	case SwitchAtomicReservation:
		return models.CheckThenInsertReservations{Store: keys}
	}
	return keys
}
