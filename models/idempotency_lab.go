package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// The failure lab's variants of the idempotency store: ways of reserving a key that a real
// shop must never use, kept so the lab can show what each protection prevents. A lab stack is
// wired with one of them instead of *IdempotencyStore (payments.Protections.Reserver picks
// it); nothing else in the shop knows they exist.

// ForgetfulReservations remembers nothing (server_idempotency off): every request runs under
// a key of its own that no retry will ever name, so each retry is a new operation.
type ForgetfulReservations struct{ Store *IdempotencyStore }

// Reserve reserves req under a fresh key.
func (f ForgetfulReservations) Reserve(ctx context.Context, req ReserveRequest) (*Reservation, error) {
	req.Key = NewID("forgotten")
	return f.Store.Reserve(ctx, req)
}

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
	k := newKeyHandle(s.Store, &row, req.Lease)
	k.finalKey = req.Key
	return &Reservation{Outcome: Reserved, Key: k}, nil
}
