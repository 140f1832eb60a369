package models

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"
)

// OwnedKey is what the owner of a reserved key can do with it; a Reservation hands one out.
// *IdempotencyKey is the shop's; the failure lab's check-then-insert reservation hands out a
// variant of it (idempotency_lab.go).
type OwnedKey interface {
	ID() string
	Key() string
	Lease() time.Duration
	Attempts() int
	Params() []byte
	OrderID() string
	PaymentID() string
	RecoveryPoint() string
	Completed() bool

	AdvanceTx(tx *gorm.DB, point string) error
	LinkTx(tx *gorm.DB, orderID, paymentID string) error
	CompleteTx(tx *gorm.DB, r Response) error
	Complete(ctx context.Context, r Response) error
	Renew(ctx context.Context) error
	Release(ctx context.Context) error
	Delete(ctx context.Context) (bool, error)
}

// IdempotencyKey is the owner's handle on a reserved key: what business code uses to record
// progress and to complete the key in its own transaction.
//
// Every write through the handle is fenced on the lock token it was reserved with: the UPDATE
// says "… WHERE id = ? AND lock_token = ?". If the lease expired and another request took the
// key over, the token no longer matches, zero rows change, and the method returns ErrLeaseLost
// so the caller's transaction rolls back. A stale owner therefore cannot overwrite the new
// owner's progress or answer, however late it wakes up.
//
// A handle is used by one request; its methods are safe to call from the renewer goroutine
// and the request at once.
type IdempotencyKey struct {
	store *IdempotencyStore
	lease time.Duration
	id    string
	token string

	// What the row held when we reserved it (read-only).
	key, params string
	attempts    int
	orderID     *string
	paymentID   *string

	mu            sync.Mutex
	recoveryPoint string
	completed     bool
}

func newKeyHandle(s *IdempotencyStore, r *IdempotencyRecord, lease time.Duration) *IdempotencyKey {
	return &IdempotencyKey{store: s, lease: lease, id: r.ID, token: *r.LockToken, key: r.Key,
		params: r.RequestParams, attempts: r.Attempts, orderID: r.OrderID, paymentID: r.PaymentID,
		recoveryPoint: r.RecoveryPoint}
}

// ID is the row's id (idk_…), for logs and for deriving downstream keys.
func (k *IdempotencyKey) ID() string { return k.id }

// Key is the client's key string.
func (k *IdempotencyKey) Key() string { return k.key }

// Lease is how long the key stays ours without a renewal.
func (k *IdempotencyKey) Lease() time.Duration { return k.lease }

// Attempts counts the requests that have owned the key, this one included: 1 on a first
// request, more when a retry resumes a released or abandoned key.
func (k *IdempotencyKey) Attempts() int { return k.attempts }

// Params is the canonical significant request stored at reservation (JSON).
func (k *IdempotencyKey) Params() []byte { return []byte(k.params) }

// OrderID and PaymentID are what earlier attempts linked to the key ("" if nothing yet).
func (k *IdempotencyKey) OrderID() string   { return deref(k.orderID) }
func (k *IdempotencyKey) PaymentID() string { return deref(k.paymentID) }

// RecoveryPoint is how far earlier attempts got: RecoveryStarted on a fresh key.
func (k *IdempotencyKey) RecoveryPoint() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.recoveryPoint
}

// Completed reports whether CompleteTx (or Complete) succeeded on this handle. If it was
// called inside a transaction, the caller knows whether that transaction committed; the
// middleware only trusts this flag when the handler returned no error.
func (k *IdempotencyKey) Completed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.completed
}

// fenced runs an UPDATE on our row that only applies while we still hold the lease.
func (k *IdempotencyKey) fenced(tx *gorm.DB, what string, set map[string]any) error {
	res := tx.Model(&IdempotencyRecord{}).
		Where("id = ? AND lock_token = ? AND state = ?", k.id, k.token, KeyInProgress).
		Updates(set)
	if res.Error != nil {
		return fmt.Errorf("%s idempotency key: %w", what, res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrLeaseLost
	}
	return nil
}

// AdvanceTx records that the operation reached point, inside tx (the transaction that did the
// work of that phase), and renews the lease. It returns ErrLeaseLost if the key was taken over.
func (k *IdempotencyKey) AdvanceTx(tx *gorm.DB, point string) error {
	t := now()
	if err := k.fenced(tx, "advance", map[string]any{"recovery_point": point, "locked_at": t, "updated_at": t}); err != nil {
		return err
	}
	k.mu.Lock()
	k.recoveryPoint = point
	k.mu.Unlock()
	return nil
}

// LinkTx records the order and/or payment the operation created (empty strings are left
// alone), inside tx. It returns ErrLeaseLost if the key was taken over.
func (k *IdempotencyKey) LinkTx(tx *gorm.DB, orderID, paymentID string) error {
	set := map[string]any{"updated_at": now()}
	if orderID != "" {
		set["order_id"] = orderID
	}
	if paymentID != "" {
		set["payment_id"] = paymentID
	}
	if err := k.fenced(tx, "link", set); err != nil {
		return err
	}
	if orderID != "" {
		k.orderID = &orderID
	}
	if paymentID != "" {
		k.paymentID = &paymentID
	}
	return nil
}

// CompleteTx stores the final answer inside tx, the transaction of the operation's last phase,
// so that the business rows and the stored answer commit together or not at all. Only the
// StoredHeaders of r.Header are kept. It returns ErrLeaseLost if the key was taken over; the
// caller must then roll back.
func (k *IdempotencyKey) CompleteTx(tx *gorm.DB, r Response) error {
	kept := map[string]string{}
	for _, name := range StoredHeaders {
		if v := r.Header.Get(name); v != "" {
			kept[name] = v
		}
	}
	headers, err := json.Marshal(kept)
	if err != nil {
		return fmt.Errorf("encode stored headers: %w", err)
	}
	body := r.Body
	if body == nil {
		body = []byte{} // NOT NULL-ish: an empty body is still an answer
	}
	t := now()
	set := map[string]any{
		"state": KeyCompleted, "recovery_point": RecoveryFinished,
		"response_status": r.Status, "response_headers": string(headers), "response_body": body,
		"lock_token": nil, "locked_at": nil, "updated_at": t, "completed_at": t,
	}
	if err := k.settleTx(tx, "complete", set); err != nil { // fenced, and announced to waiters
		return err
	}
	k.mu.Lock()
	k.completed, k.recoveryPoint = true, RecoveryFinished
	k.mu.Unlock()
	return nil
}

// Complete is CompleteTx on its own (one commit), for outcomes that have no business write
// to join (a decline that wrote nothing, an answer computed by a handler that does not know
// about keys).
func (k *IdempotencyKey) Complete(ctx context.Context, r Response) error {
	return inOneCommit(k.store.db.WithContext(ctx), func(tx *gorm.DB) error { return k.CompleteTx(tx, r) })
}

// Renew extends the lease by another Lease from now. The middleware's renewer calls it every
// Lease/3 while the handler works. It returns ErrLeaseLost if the key was taken over or is no
// longer in progress.
func (k *IdempotencyKey) Renew(ctx context.Context) error {
	t := now()
	return k.fenced(k.store.db.WithContext(ctx), "renew", map[string]any{"locked_at": t, "updated_at": t})
}

// Release frees the lease but keeps the key and its recovery point, after an infrastructure
// failure (database down, gateway timeout, panic): the outcome is unknown or the work is half
// done, so a retry with the same key must resume, not start afresh. It returns ErrLeaseLost if
// the key was no longer ours (nothing to release).
func (k *IdempotencyKey) Release(ctx context.Context) error {
	return inOneCommit(k.store.db.WithContext(ctx), func(tx *gorm.DB) error {
		return k.settleTx(tx, "release", map[string]any{"lock_token": nil, "locked_at": nil, "updated_at": now()})
	})
}

// Delete removes the key after an outcome that is not stored (a validation error, 404, 401,
// 429), so that the client can send a corrected request under the same key. It only deletes
// a key that never got beyond RecoveryStarted: once an operation has made progress, its key
// is never forgotten, and Delete falls back to Release. It reports whether the row was deleted;
// ErrLeaseLost means the key was no longer ours.
func (k *IdempotencyKey) Delete(ctx context.Context) (bool, error) {
	db := k.store.db.WithContext(ctx)
	res := db.Where("id = ? AND lock_token = ? AND state = ? AND recovery_point = ?",
		k.id, k.token, KeyInProgress, RecoveryStarted).Delete(&IdempotencyRecord{})
	if res.Error != nil {
		return false, fmt.Errorf("delete idempotency key: %w", res.Error)
	}
	if res.RowsAffected == 1 {
		return true, nil
	}
	return false, k.Release(ctx)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
