package models

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"
)

// The failure lab's variants of the stores: ways of reserving a key and of settling a payment
// that a real shop must never use, kept so the lab can show what each protection prevents. A
// lab stack is wired with one of them (payments/protections.go picks it); nothing else in the
// shop knows they exist.

// ForgetfulReservations remembers nothing (server_idempotency off): the lab's true baseline.
// It reads and writes no key at all — no idempotency_keys row, no reservation journal row —
// and the middleware neither requires nor reads the header (Forgets). Every request runs as a
// new operation under an in-memory handle (MemoryKey), so the operations run the same business
// code, phase by phase, as the protected shop; only the key's statements are missing. That is
// what makes the lab's throughput ratio the price of the mechanism.
type ForgetfulReservations struct{ Store *IdempotencyStore }

// Reserve hands out an in-memory key; it touches no table.
func (f ForgetfulReservations) Reserve(_ context.Context, req ReserveRequest) (*Reservation, error) {
	return &Reservation{Outcome: Reserved, Key: &MemoryKey{id: NewID("mem"), lease: req.Lease, params: string(req.Params),
		recoveryPoint: RecoveryStarted}}, nil
}

// Forgets tells the middleware that no key is kept, so none is required.
func (ForgetfulReservations) Forgets() bool { return true }

// MemoryKey is an OwnedKey that keeps its progress in memory only and writes nothing: the
// phases record their recovery point and links in it, and a completion just marks it. After
// a crash nothing of it survives, so nothing resumes the operation: that is the baseline.
type MemoryKey struct {
	id, params string
	lease      time.Duration

	mu                 sync.Mutex
	recoveryPoint      string
	orderID, paymentID string
	completed          bool
}

// ID names the handle (mem_…), for logs; Key is empty: no client key is kept.
func (k *MemoryKey) ID() string           { return k.id }
func (k *MemoryKey) Key() string          { return "" }
func (k *MemoryKey) Lease() time.Duration { return k.lease }
func (k *MemoryKey) Attempts() int        { return 1 }
func (k *MemoryKey) Params() []byte       { return []byte(k.params) }

func (k *MemoryKey) OrderID() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.orderID
}

func (k *MemoryKey) PaymentID() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.paymentID
}

func (k *MemoryKey) RecoveryPoint() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.recoveryPoint
}

func (k *MemoryKey) Completed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.completed
}

// Transaction is a plain transaction: there is no key row to insert.
func (k *MemoryKey) Transaction(db *gorm.DB, fn func(tx *gorm.DB) error) error {
	return db.Transaction(fn)
}

// Claim has no row to write.
func (k *MemoryKey) Claim(context.Context) error { return nil }

func (k *MemoryKey) AdvanceTx(tx *gorm.DB, point string) error {
	return k.ProgressTx(tx, point, "", "")
}
func (k *MemoryKey) LinkTx(tx *gorm.DB, orderID, paymentID string) error {
	return k.ProgressTx(tx, "", orderID, paymentID)
}

// ProgressTx remembers the point and the links; tx is not written to.
func (k *MemoryKey) ProgressTx(_ *gorm.DB, point, orderID, paymentID string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if point != "" {
		k.recoveryPoint = point
	}
	if orderID != "" {
		k.orderID = orderID
	}
	if paymentID != "" {
		k.paymentID = paymentID
	}
	return nil
}

func (k *MemoryKey) CompleteTx(_ *gorm.DB, _ Response) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.completed, k.recoveryPoint = true, RecoveryFinished
	return nil
}

func (k *MemoryKey) Complete(_ context.Context, r Response) error { return k.CompleteTx(nil, r) }
func (k *MemoryKey) Renew(context.Context) error                  { return nil }
func (k *MemoryKey) Release(context.Context) error                { return nil }
func (k *MemoryKey) Delete(context.Context) (bool, error)         { return true, nil }

// CheckThenInsertReservations is the RACY reservation that Reserve replaces
// (atomic_reservation off). It knows two states, absent and completed: it SELECTs the key; a
// completed key is replayed (or a mismatch refused) as by Reserve. An absent key is run, and
// its answer is written under the key only when the operation completes. Two requests that
// both SELECT before either completes both run the operation: that window is the bug. (While
// it runs, the operation's progress lives in a row under a private name, so the rest of the
// code path is unchanged.)
type CheckThenInsertReservations struct{ Store *IdempotencyStore }

// Reserve checks, then lets the caller run.
func (s CheckThenInsertReservations) Reserve(ctx context.Context, req ReserveRequest) (*Reservation, error) {
	db := s.Store.db.WithContext(ctx)
	var existing IdempotencyRecord
	err := db.Where("tenant_id = ? AND key = ?", req.TenantID, req.Key).Take(&existing).Error
	switch {
	case err == nil:
		if existing.Principal != req.Principal || existing.Endpoint != req.Endpoint || existing.Fingerprint != req.Fingerprint {
			return &Reservation{Outcome: Mismatch}, nil
		}
		if existing.State != KeyCompleted {
			return &Reservation{Outcome: InProgress, RetryAfter: time.Second}, nil
		}
		resp, err := existing.storedResponse()
		if err != nil {
			return nil, err
		}
		return &Reservation{Outcome: Replay, Response: resp}, nil
	case !errors.Is(err, gorm.ErrRecordNotFound):
		return nil, fmt.Errorf("read idempotency key: %w", err)
	}
	t := now()
	token := NewID("lease")
	row := IdempotencyRecord{
		ID: NewID("idk"), TenantID: req.TenantID, Key: NewID("unreserved"), Principal: req.Principal,
		Endpoint: req.Endpoint, Fingerprint: req.Fingerprint, State: KeyInProgress,
		RecoveryPoint: RecoveryStarted, LockToken: &token, LockedAt: &t,
		RequestParams: string(req.Params), Attempts: 1, CreatedAt: t, UpdatedAt: t,
	}
	if err := db.Create(&row).Error; err != nil {
		return nil, fmt.Errorf("insert working idempotency row: %w", err)
	}
	return &Reservation{Outcome: Reserved, Key: &insertedAtCompletion{newKeyHandle(s.Store, &row, req.Lease), req.Key}}, nil
}

// insertedAtCompletion is the handle of a check-then-insert reservation: the row works under a
// private name, and takes the client's key only in the transaction that completes it, so the
// completed answer appears only then. A second request that ran meanwhile fails there, on the
// (tenant_id, key) constraint.
type insertedAtCompletion struct {
	*IdempotencyKey
	clientKey string
}

// CompleteTx names the row after the client's key, then completes it, inside tx.
func (k *insertedAtCompletion) CompleteTx(tx *gorm.DB, r Response) error {
	if err := k.fenced(tx, "name", map[string]any{"key": k.clientKey}); err != nil {
		return err
	}
	return k.IdempotencyKey.CompleteTx(tx, r)
}

// Complete is CompleteTx in a transaction of its own.
func (k *insertedAtCompletion) Complete(ctx context.Context, r Response) error {
	return k.store.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return k.CompleteTx(tx, r)
	})
}

// OverwritePaymentStatusTx is SettlePaymentTx WITHOUT the forward-only rule
// (monotonic_status off): it writes status (pending included) whatever the current one, and
// moves the order along, so a late or reordered event can move a paid order back.
func OverwritePaymentStatusTx(tx *gorm.DB, paymentID, status, chargeID, declineCode string) (*PaymentTransition, error) {
	orderStatus, ok := map[string]string{PaymentSucceeded: OrderPaid, PaymentFailed: OrderPaymentFailed,
		PaymentRefunded: "", PaymentPending: OrderPendingPayment}[status]
	if !ok {
		return nil, fmt.Errorf("overwrite payment status: %q is not a payment status", status)
	}
	res := tx.Model(&Payment{}).Where("id = ? AND status <> ?", paymentID, status).
		Updates(settlement(tx, status, chargeID, declineCode))
	if res.Error != nil {
		return nil, fmt.Errorf("settle payment %s: %w", paymentID, res.Error)
	}
	moved := res.RowsAffected == 1
	if moved && orderStatus != "" {
		ofPayment := tx.Model(&Payment{}).Select("order_id").Where("id = ?", paymentID)
		err := tx.Model(&Order{}).Where("id = (?)", ofPayment).
			Updates(map[string]any{"status": orderStatus, "updated_at": tx.NowFunc()}).Error
		if err != nil {
			return nil, fmt.Errorf("move order of payment %s to %s: %w", paymentID, orderStatus, err)
		}
	}
	return transitionTx(tx, paymentID, moved)
}
