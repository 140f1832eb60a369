package payments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"gorm.io/gorm"

	"checkoutlab/models"
)

// WebhookProcessor applies verified gateway events to payments and orders.
type WebhookProcessor struct {
	DB     *gorm.DB
	Outbox Outbox
	// Journal, when set, records each delivery of an event about one of our payments and
	// its decision, duplicates included.
	Journal Journal
	Logger  *slog.Logger
	// Protections is all on (the zero value) except in the failure lab; see Protections.
	Protections Protections
}

// eventStatus maps an event type to the payment status it reports. charge.pending reports
// nothing new: every payment starts pending.
var eventStatus = map[string]string{
	"charge.succeeded": models.PaymentSucceeded,
	"charge.failed":    models.PaymentFailed,
	"charge.refunded":  models.PaymentRefunded,
	"charge.pending":   "",
}

// DecisionIgnored is the decision for an authentic event of a type the shop does not handle.
// As Stripe advises, such events are acknowledged (2xx) so the provider does not retry them
// for days, and nothing is recorded or changed.
const DecisionIgnored = "ignored"

// Process applies one event, exactly once, and reports what it decided and whether the event
// was a duplicate. Everything happens in one transaction: recording the event id, moving the
// payment (and its order) forward, enqueuing the side effects of a payment that just
// succeeded. A duplicate (the id is already recorded) changes nothing. A status never moves
// back: a late charge.pending, or a charge.succeeded after charge.refunded, is recorded as
// no_change. An event about a charge that is not ours is recorded as unknown_payment.
//
// The caller answers 2xx only after Process returns nil, i.e. after the commit, so a crash
// before it makes the gateway deliver the event again.
func (p *WebhookProcessor) Process(ctx context.Context, ev GatewayEvent) (decision string, duplicate bool, err error) {
	status, ok := p.Protections.eventStatus(ev.Type)
	if !ok {
		p.log().InfoContext(ctx, "webhook of unhandled type ignored", "event_id", ev.ID, "type", ev.Type)
		return DecisionIgnored, false, nil
	}
	if ev.ID == "" || ev.Data.Charge.ID == "" {
		return "", false, models.Invalid("event without id or charge", nil)
	}
	charge := ev.Data.Charge
	err = p.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		recorded, err := p.Protections.recordWebhookEventTx(tx, &models.WebhookEvent{
			EventID: ev.ID, Type: ev.Type, ChargeID: charge.ID, Decision: models.DecisionNoChange, PayloadHash: payloadHash(ev),
		})
		if err != nil {
			return err
		}
		pay, err := paymentOfCharge(tx, charge)
		if errors.Is(err, models.ErrNotFound) {
			if !recorded {
				duplicate = true
				return nil
			}
			// Not ours: there is no order to journal it under; the log and webhook_events
			// keep it.
			decision = models.DecisionUnknownPayment
			return models.SetWebhookDecisionTx(tx, ev.ID, decision, "")
		}
		if err != nil {
			return err
		}
		journal := func(detail string) error {
			return recordTx(p.Journal, tx, models.JournalEvent{TenantID: pay.TenantID, OrderID: pay.OrderID,
				PaymentID: pay.ID, Actor: models.ActorWebhook, Kind: models.JournalWebhook,
				Detail: fmt.Sprintf("%s: %s %s for charge %s", detail, ev.Type, ev.ID, charge.ID)})
		}
		if !recorded {
			// A redelivery: it changes nothing, but the ops view shows that it came — and a
			// changed payload under a processed id is flagged for reconciliation.
			duplicate = true
			conflict, err := models.MarkWebhookConflictTx(tx, ev.ID, *payloadHash(ev))
			if err != nil {
				return err
			}
			if conflict {
				return journal("conflict: another payload under an already-processed webhook-id, nothing changed; reconciliation lists it")
			}
			return journal("duplicate, already processed, nothing changed")
		}
		decision = models.DecisionNoChange
		// An event about another charge than the one this payment recorded (a second charge
		// by a provider that ignored our key) must not move this payment: reconciliation
		// reports that charge instead.
		otherCharge := pay.GatewayChargeID != nil && *pay.GatewayChargeID != charge.ID
		// Nor may a charge of another amount or currency: it is not this payment's outcome.
		mismatch := !chargeFits(pay, charge)
		if status != "" && !otherCharge && !mismatch {
			t, err := p.Protections.settleTx(tx, pay.ID, status, charge.ID, charge.FailureCode)
			if err != nil {
				return err
			}
			if t.Moved {
				decision = models.DecisionApplied
			}
			// Only the writer that moved the payment to succeeded enqueues its side effects:
			// a response that got there first already did.
			if p.Protections.enqueuesSideEffects(t, status) {
				if err := p.Outbox.EnqueueSideEffectsTx(tx, t.Order); err != nil {
					return err
				}
			}
		}
		if err := models.SetWebhookDecisionTx(tx, ev.ID, decision, pay.ID); err != nil {
			return err
		}
		if mismatch {
			return journal(mismatchDetail(pay, charge))
		}
		return journal(decision)
	})
	if err != nil {
		return "", false, fmt.Errorf("process webhook %s: %w", ev.ID, err)
	}
	p.log().InfoContext(ctx, "webhook", "event_id", ev.ID, "type", ev.Type, "charge_id", charge.ID,
		"decision", decision, "duplicate", duplicate)
	return decision, duplicate, nil
}

// paymentOfCharge finds our payment for a gateway charge: by the payment id we sent in the
// charge's metadata (the only link when the response was lost), checked against the tenant we
// sent, or else by the charge id we recorded.
func paymentOfCharge(tx *gorm.DB, c GatewayCharge) (*models.Payment, error) {
	if id := c.Metadata["payment_id"]; id != "" {
		p, err := models.GetPaymentTx(tx, id)
		if err == nil && p.TenantID == c.Metadata["tenant"] {
			return p, nil
		}
		if err != nil && !errors.Is(err, models.ErrNotFound) {
			return nil, err
		}
	}
	var p models.Payment
	err := tx.Where("gateway_charge_id = ?", c.ID).Take(&p).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, models.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("payment by charge: %w", err)
	}
	return &p, nil
}

func (p *WebhookProcessor) log() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.Default()
}
