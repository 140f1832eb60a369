package payments

import (
	"context"
	"fmt"
	"slices"

	"github.com/riverqueue/river"
	"gorm.io/gorm"

	"checkoutlab/models"
)

// This file and models/idempotency_lab.go are everything the failure lab changes. Each
// protection is one mechanism in the real code path; a lab stack turns exactly one of them off
// to show the failure it prevents, and every place where that matters is a method below: the
// operations, the webhook processor and the side-effect workers call these methods and never
// test a switch themselves.

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

// Check fails for an unknown switch name.
func (p Protections) Check() error {
	if p.Off == "" || slices.Contains(Switches, p.Off) {
		return nil
	}
	return fmt.Errorf("unknown protection switch %q", p.Off)
}

// KeyReserver is how the idempotency middleware reserves keys.
type KeyReserver interface {
	Reserve(ctx context.Context, req models.ReserveRequest) (*models.Reservation, error)
}

// Reserver is how a stack's idempotency middleware reserves keys: the store's one atomic
// INSERT … ON CONFLICT (Reserve). With server_idempotency off, under a fresh key each time, so
// nothing is remembered; with atomic_reservation off, by checking first and inserting the key
// only when the operation completes.
func (p Protections) Reserver(keys *models.IdempotencyStore) KeyReserver {
	switch p.Off {
	case SwitchServerIdempotency:
		return models.ForgetfulReservations{Store: keys}
	case SwitchAtomicReservation:
		return models.CheckThenInsertReservations{Store: keys}
	}
	return keys
}

// chargeAttempt is the gateway key an attempt charges a payment under — the key derived from
// the payment, the same on every attempt — and whether it first asks the gateway what happened
// under that key (a resumed attempt does). With derived_gateway_key off, a fresh key per
// attempt, as a shop that makes up its gateway key at call time would send; a lookup under it
// would find nothing, so there is none.
func (p Protections) chargeAttempt(pay *models.Payment, resumed bool) (gatewayKey string, lookUpFirst bool) {
	if p.On(SwitchDerivedGatewayKey) {
		return pay.GatewayKey, resumed
	}
	return models.NewID("lab") + ":charge", false
}

// settleTx settles a payment forward-only (models.SettlePaymentTx). With monotonic_status off,
// it overwrites the status whatever it is.
func (p Protections) settleTx(tx *gorm.DB, paymentID, status, chargeID, declineCode string) (*models.PaymentTransition, error) {
	if p.On(SwitchMonotonicStatus) {
		return models.SettlePaymentTx(tx, paymentID, status, chargeID, declineCode)
	}
	return models.OverwritePaymentStatusTx(tx, paymentID, status, chargeID, declineCode)
}

// settleHeldTx is settleTx for the operation that holds the payment and order it wrote
// (models.SettleHeldPaymentTx). With monotonic_status off, the overwrite, which reads them back.
func (p Protections) settleHeldTx(tx *gorm.DB, pay *models.Payment, order *models.Order, status, chargeID, declineCode string) (*models.PaymentTransition, error) {
	if p.On(SwitchMonotonicStatus) {
		return models.SettleHeldPaymentTx(tx, pay, order, status, chargeID, declineCode)
	}
	return models.OverwritePaymentStatusTx(tx, pay.ID, status, chargeID, declineCode)
}

// eventStatus is the payment status a webhook event of eventType reports, and whether the shop
// handles the type at all. charge.pending reports nothing new (every payment starts pending);
// with monotonic_status off it reports pending, which the overwrite then writes as it is.
func (p Protections) eventStatus(eventType string) (status string, handled bool) {
	status, handled = eventStatus[eventType]
	if handled && status == "" && !p.On(SwitchMonotonicStatus) {
		status = models.PaymentPending
	}
	return status, handled
}

// recordWebhookEventTx records a webhook event's id and reports whether this delivery is its
// first, the one to apply. With webhook_dedupe off, every delivery is applied as if it were
// new.
func (p Protections) recordWebhookEventTx(tx *gorm.DB, ev *models.WebhookEvent) (bool, error) {
	first, err := models.RecordWebhookEventTx(tx, ev)
	return first || !p.On(SwitchWebhookDedupe), err
}

// enqueuesSideEffects reports whether the writer that settled a payment as reported enqueues
// the side effects of its paid order: only the writer that moved it to succeeded, so a
// response and a webhook racing to settle one payment enqueue once. With webhook_dedupe off,
// every writer that reports it succeeded does.
func (p Protections) enqueuesSideEffects(t *models.PaymentTransition, reported string) bool {
	if t.Payment.Status != models.PaymentSucceeded {
		return false
	}
	return t.Moved || !p.On(SwitchWebhookDedupe) && reported == models.PaymentSucceeded
}

// uniqueJobs is how side-effect jobs are enqueued: unique by their arguments, River's second
// guard after the writer that moved the payment. With webhook_dedupe off, every enqueue is a
// new job.
func (p Protections) uniqueJobs() *river.InsertOpts {
	if !p.On(SwitchWebhookDedupe) {
		return nil
	}
	return &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// dedupeKey is the key under which the receiving side (mailbox, warehouse) writes a side
// effect once, however often its job runs. With webhook_dedupe off there is none, so a second
// run writes a second message or requests a second shipment.
func (p Protections) dedupeKey(key string) *string {
	if !p.On(SwitchWebhookDedupe) {
		return nil
	}
	return &key
}
