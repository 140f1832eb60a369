package payments

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"checkoutlab/models"
)

// A charge is a payment's outcome only if it is for the payment's amount, in the payment's
// currency. Metadata and idempotency keys say which payment a charge claims to be for, but
// anyone who can reach the gateway can send them: a 1-cent charge carrying the shop's metadata,
// or a declined charge planted under the shop's derived key, is not what this payment came to.
// Every path that settles a payment from a charge — the webhook, the lookup of a resumed
// operation (a retry or the completer), the triage desk's "check now" — goes through
// chargeFits, and reconciliation lists what does not fit under amount_mismatches.

// chargeFits reports whether c can be the outcome of pay: the same amount and currency.
func chargeFits(pay *models.Payment, c GatewayCharge) bool {
	return c.Amount == pay.Amount && c.Currency == pay.Currency
}

// mismatchDetail words a charge that does not fit pay, for the journal.
func mismatchDetail(pay *models.Payment, c GatewayCharge) string {
	return fmt.Sprintf("amount_mismatch: charge %s (%s) is for %d %s, the payment for %d %s; it is not this payment's outcome, nothing changed",
		c.ID, c.Status, c.Amount, c.Currency, pay.Amount, pay.Currency)
}

// errKeyTaken is the answer of an operation whose gateway key holds only charges that are not
// for its amount: someone else used the key first, so no charge under it can be this
// payment's. The payment stays pending, and the key is released like after any unknown
// outcome, until an operator settles it from the reconciliation desk.
var errKeyTaken = models.ErrPaymentOutcomeUnknown.Msgf(
	"the payment provider holds another charge under this payment's key; the payment stays pending until the shop has checked it")

// ownCharges keeps, of the charges the gateway holds under pay's key, those that can be its
// outcome, and journals every other one (ev names the operation). If there were charges and
// none fits, it returns errKeyTaken: charging again under the key would only replay, or be
// refused as a reuse of, a request that was not ours.
func (s *Service) ownCharges(ctx context.Context, key Key, pay *models.Payment, charges []GatewayCharge) ([]GatewayCharge, error) {
	own := charges[:0:0]
	for _, c := range charges {
		if chargeFits(pay, c) {
			own = append(own, c)
			continue
		}
		s.journalGateway(ctx, key, pay, models.JournalGatewayLookup, mismatchDetail(pay, c))
	}
	if len(own) == 0 && len(charges) > 0 {
		return nil, errKeyTaken
	}
	return own, nil
}

// payloadHash identifies an event's content as the shop reads it: the SHA-256 of its
// canonical JSON (Go's encoding of GatewayEvent, map keys sorted). Two deliveries under one
// webhook-id with different hashes carry different payloads.
func payloadHash(ev GatewayEvent) *string {
	b, _ := json.Marshal(ev) // plain values always marshal
	sum := sha256.Sum256(b)
	h := hex.EncodeToString(sum[:])
	return &h
}
