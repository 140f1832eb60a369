package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// The writes the triage desk's actions need besides their decision: taking over a stuck
// payment's key now, giving an order's stock back once, and flagging a webhook-id that came
// back with another payload.

// ErrKeyBusy is returned by ClaimPaymentKey when a request is working on the payment right
// now, and nobody else may take its key. It is never an answer of its own: the desk turns it
// into action_not_allowed.
var ErrKeyBusy = errors.New("a request is working on this payment right now")

// RefundKeyFor is the idempotency key the shop uses toward the gateway to refund chargeID, an
// extra charge of orderID. It is derived, not made up at click time, so a second click, a
// retry or a second operator sends the same key and the gateway refunds once.
func RefundKeyFor(orderID, chargeID string) string { return orderID + ":refund:" + chargeID }

// ClaimPaymentKey takes over, now, the in-progress idempotency key that created paymentID, as
// a completer would: with the same compare-and-set as Reserve's takeover, so it never owns the
// key together with a client retry, a completer or another operator. Unlike ClaimAbandoned it
// does not wait for the key to look abandoned: a key whose owner released it (lock_token
// NULL) is taken at once; one whose owner holds a live lease is not (ErrKeyBusy). ErrNotFound
// means no key of the tenant is in progress for the payment.
func (s *IdempotencyStore) ClaimPaymentKey(ctx context.Context, tenantID, paymentID string, lease time.Duration) (*ClaimedKey, error) {
	db := s.db.WithContext(ctx)
	var r IdempotencyRecord
	err := db.Where("tenant_id = ? AND payment_id = ? AND state = ?", tenantID, paymentID, KeyInProgress).
		Order("updated_at DESC").Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("find the payment's idempotency key: %w", err)
	}
	t := now()
	token := NewID("lease")
	res := db.Model(&IdempotencyRecord{}).
		Where("id = ? AND state = ? AND (lock_token IS NULL OR locked_at < ?)", r.ID, KeyInProgress, t.Add(-lease)).
		Updates(map[string]any{"lock_token": token, "locked_at": t, "updated_at": t, "attempts": gorm.Expr("attempts + 1")})
	if res.Error != nil {
		return nil, fmt.Errorf("claim the payment's idempotency key: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return nil, ErrKeyBusy
	}
	r.LockToken, r.LockedAt, r.UpdatedAt = &token, &t, t
	r.Attempts++
	return &ClaimedKey{Key: newKeyHandle(s, &r, lease), TenantID: r.TenantID, Endpoint: r.Endpoint}, nil
}

// ReleaseStockTx gives the stock an unpaid order reserved back to the catalogue, inside tx,
// and reports whether this call did. One conditional UPDATE marks the order's stock released
// ("… WHERE stock_released_at IS NULL"), so however many writers race to release it, one
// wins and the stock comes back once. A paid order keeps its stock.
func ReleaseStockTx(tx *gorm.DB, orderID string) (bool, error) {
	res := tx.Model(&Order{}).Where("id = ? AND stock_released_at IS NULL AND status <> ?", orderID, OrderPaid).
		Updates(map[string]any{"stock_released_at": tx.NowFunc(), "updated_at": tx.NowFunc()})
	if res.Error != nil {
		return false, fmt.Errorf("mark stock released: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return false, nil
	}
	var lines []OrderLine
	if err := tx.Where("order_id = ?", orderID).Order("product_id").Find(&lines).Error; err != nil {
		return false, fmt.Errorf("load order lines: %w", err)
	}
	// One statement per line, in product id order like reserveStock: an order has a handful
	// of lines, and two transactions then lock product rows in the same order.
	for _, l := range lines {
		if err := tx.Model(&Product{}).Where("id = ?", l.ProductID).
			Update("stock", gorm.Expr("stock + ?", l.Quantity)).Error; err != nil {
			return false, fmt.Errorf("give back stock of %s: %w", l.SKU, err)
		}
	}
	return true, nil
}

// ExpireOrderTx expires an unpaid order now, inside tx, and gives its stock back once (see
// ReleaseStockTx): the operator's "settle as failed" ends the order as the hold would have,
// so no later payment can pay for stock that is back on the shelf. It reports whether the
// stock came back in this call. A paid order is left as it is.
func ExpireOrderTx(tx *gorm.DB, orderID string) (bool, error) {
	if err := tx.Model(&Order{}).Where("id = ? AND status IN ?", orderID, orderPredecessors[OrderExpired]).
		Updates(map[string]any{"status": OrderExpired, "updated_at": tx.NowFunc()}).Error; err != nil {
		return false, fmt.Errorf("expire order: %w", err)
	}
	return ReleaseStockTx(tx, orderID)
}

// MarkWebhookConflictTx reports whether a redelivery of eventID carries another payload than
// the one processed first (payloadHash differs from the stored hash), and if so records when,
// for reconciliation to list. An event recorded without a hash (before hashes were kept)
// never conflicts.
func MarkWebhookConflictTx(tx *gorm.DB, eventID, payloadHash string) (bool, error) {
	res := tx.Model(&WebhookEvent{}).
		Where("event_id = ? AND payload_hash IS NOT NULL AND payload_hash <> ?", eventID, payloadHash).
		Updates(map[string]any{"conflict_at": tx.NowFunc()})
	if res.Error != nil {
		return false, fmt.Errorf("record webhook conflict: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}
