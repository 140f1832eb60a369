package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
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

	Transaction(db *gorm.DB, fn func(tx *gorm.DB) error) error
	Claim(ctx context.Context) error
	AdvanceTx(tx *gorm.DB, point string) error
	LinkTx(tx *gorm.DB, orderID, paymentID string) error
	ProgressTx(tx *gorm.DB, point, orderID, paymentID string) error
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
//
// # A fresh key is written by the operation's first transaction
//
// The shop's middleware reserves with ReserveRequest.Deferred: it only READS the key, and a
// key that has no row yet comes back as an unwritten handle. The row is then INSERTed — the
// same single INSERT … ON CONFLICT (tenant_id, key) DO NOTHING as Reserve's — as the FIRST
// statement of the operation's first transaction (Transaction), or by the first fenced write
// if the operation has no phases (CompleteTx in the business transaction of POST /orders).
// The reservation costs no commit of its own: it commits with the first phase's work.
//
// Why it is still atomic: the read decides nothing. Two requests with one fresh key may both
// read "absent" and both start; the unique index on (tenant_id, key) picks the owner. On
// PostgreSQL the second INSERT waits for the first transaction to end; on SQLite the
// transactions run one after the other. Either way, if the first commits, the second INSERT
// inserts nothing, the handle returns ErrKeyTaken, the loser's transaction rolls back with
// everything it did, and the middleware goes back to the decision (409 in progress, or the
// replay). What the read buys: a replay, a 409 or a 422 costs one SELECT and no write; and a
// fresh key costs one commit fewer. What it costs: work done before the first transaction
// (the checkout's exchange of the card for a gateway payment method, which charges nothing)
// may be done by both racers.
//
// Until the row is known to be committed, there is nothing to renew (no other request can
// see the lease) and nothing to release or delete (a rolled-back INSERT left nothing).
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
	row           rowState
	fresh         *IdempotencyRecord // the row to insert while row is rowUnwritten
}

// rowState says whether the key's row exists in the database.
type rowState int

const (
	rowWritten   rowState = iota // committed: renew, release and update it
	rowUnwritten                 // not in the database: the first write inserts it
	rowInserted                  // inserted by a transaction that may not have committed yet
)

// ErrKeyTaken: the fresh key's INSERT found the key made by another request, which won the
// race on the unique index. The transaction must roll back, and the request go back to the
// decision (the middleware does): the key is now in progress or completed.
var ErrKeyTaken = errors.New("the idempotency key was reserved by another request first")

func newKeyHandle(s *IdempotencyStore, r *IdempotencyRecord, lease time.Duration) *IdempotencyKey {
	return &IdempotencyKey{store: s, lease: lease, id: r.ID, token: *r.LockToken, key: r.Key,
		params: r.RequestParams, attempts: r.Attempts, orderID: r.OrderID, paymentID: r.PaymentID,
		recoveryPoint: r.RecoveryPoint}
}

// newUnwrittenKey is the handle of a fresh key whose row r is not written yet.
func newUnwrittenKey(s *IdempotencyStore, r *IdempotencyRecord, lease time.Duration) *IdempotencyKey {
	k := newKeyHandle(s, r, lease)
	k.row, k.fresh = rowUnwritten, r
	return k
}

func (k *IdempotencyKey) rowState() rowState {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.row
}

func (k *IdempotencyKey) setRowState(st rowState) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.row = st
}

// Transaction runs fn in a transaction of db whose first statement, for an unwritten key, is
// the key's INSERT: the reservation commits with fn's work, or not at all. It returns
// ErrKeyTaken if another request holds the key already (its INSERT wins; ours inserted
// nothing), and fn's error otherwise. The operations run each phase through it.
func (k *IdempotencyKey) Transaction(db *gorm.DB, fn func(tx *gorm.DB) error) error {
	fresh := k.rowState() == rowUnwritten
	err := db.Transaction(func(tx *gorm.DB) error {
		if fresh {
			if err := k.insertTx(tx, nil); err != nil {
				return err
			}
		}
		return fn(tx)
	})
	if fresh {
		if err != nil {
			k.setRowState(rowUnwritten) // rolled back: the INSERT went with it
		} else {
			k.setRowState(rowWritten)
		}
	}
	return err
}

// Claim writes a fresh key's row now, in a statement of its own (the reservation as Reserve
// makes it), and does nothing for a key already written. An operation that does something
// outside the database before its first transaction — a gateway refund — must call it first:
// folding the INSERT into a later transaction would let a duplicate request do that
// something too, and then lose the race for the key. It returns ErrKeyTaken if another
// request holds the key.
func (k *IdempotencyKey) Claim(ctx context.Context) error {
	if k.rowState() != rowUnwritten {
		return nil
	}
	if err := k.insertTx(k.store.db.WithContext(ctx), nil); err != nil {
		return err
	}
	k.setRowState(rowWritten) // a statement of its own: committed
	return nil
}

// insertTx writes the fresh key's row, with the columns of set (a fenced write's) applied, in
// one INSERT … ON CONFLICT DO NOTHING. Nothing inserted means another request made the key.
func (k *IdempotencyKey) insertTx(tx *gorm.DB, set map[string]any) error {
	k.mu.Lock()
	r := *k.fresh
	r.OrderID, r.PaymentID = k.orderID, k.paymentID // links remembered by LinkTx
	k.mu.Unlock()
	row := map[string]any{"id": r.ID, "tenant_id": r.TenantID, "key": r.Key, "principal": r.Principal,
		"endpoint": r.Endpoint, "fingerprint": r.Fingerprint, "state": r.State, "recovery_point": r.RecoveryPoint,
		"lock_token": r.LockToken, "locked_at": r.LockedAt, "request_params": r.RequestParams,
		"attempts": r.Attempts, "order_id": r.OrderID, "payment_id": r.PaymentID,
		"created_at": r.CreatedAt, "updated_at": r.UpdatedAt}
	for col, v := range set {
		row[col] = v
	}
	res := tx.Table(IdempotencyRecord{}.TableName()).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "tenant_id"}, {Name: "key"}},
		DoNothing: true,
	}).Create(row)
	if res.Error != nil {
		return fmt.Errorf("reserve idempotency key: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrKeyTaken
	}
	k.setRowState(rowInserted)
	return nil
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
func (k *IdempotencyKey) OrderID() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return deref(k.orderID)
}

func (k *IdempotencyKey) PaymentID() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return deref(k.paymentID)
}

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

// fenced runs an UPDATE on our row that only applies while we still hold the lease. On a key
// whose row is not written yet, it inserts the row with set applied instead — except for a
// renewal or a release, which have nothing to act on: no other request can see the key.
func (k *IdempotencyKey) fenced(tx *gorm.DB, what string, set map[string]any) error {
	switch st := k.rowState(); {
	case st == rowUnwritten && (what == "renew" || what == "release"):
		return nil
	case st == rowUnwritten:
		return k.insertTx(tx, set)
	case st == rowInserted && what == "renew":
		return nil // the inserting transaction may still be open: its row is not visible yet
	}
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
//
// On a fresh key not written yet, it writes nothing: the key's INSERT, which the next write
// of the handle does (CompleteTx, in the same transaction), carries the links. So a POST
// /orders writes its key in one statement, completed and linked.
func (k *IdempotencyKey) LinkTx(tx *gorm.DB, orderID, paymentID string) error {
	if k.rowState() == rowUnwritten {
		k.remember(orderID, paymentID)
		return nil
	}
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
	k.remember(orderID, paymentID)
	return nil
}

// remember records the links in the handle (empty strings are left alone).
func (k *IdempotencyKey) remember(orderID, paymentID string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if orderID != "" {
		k.orderID = &orderID
	}
	if paymentID != "" {
		k.paymentID = &paymentID
	}
}

// ProgressTx is LinkTx and AdvanceTx in one UPDATE: the order and payment the phase created
// (empty strings are left alone) and the recovery point it reached, inside tx.
func (k *IdempotencyKey) ProgressTx(tx *gorm.DB, point, orderID, paymentID string) error {
	t := now()
	set := map[string]any{"recovery_point": point, "locked_at": t, "updated_at": t}
	if orderID != "" {
		set["order_id"] = orderID
	}
	if paymentID != "" {
		set["payment_id"] = paymentID
	}
	if err := k.fenced(tx, "advance", set); err != nil {
		return err
	}
	k.mu.Lock()
	k.recoveryPoint = point
	k.mu.Unlock()
	k.remember(orderID, paymentID)
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
	if k.rowState() == rowUnwritten {
		return true, nil // never written (or rolled back): there is nothing to delete
	}
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
