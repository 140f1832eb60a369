package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Idempotency key states. A key that has no row is the third state, "absent".
const (
	KeyInProgress = "in_progress"
	KeyCompleted  = "completed"
)

// Recovery points every operation shares. Multi-step operations add their own in between: the
// checkout and payment operations go "started" → "payment_created" → "finished"
// (payments/service.go).
const (
	RecoveryStarted  = "started"
	RecoveryFinished = "finished"
)

// StoredHeaders is the allowlist of response headers kept with a completed key and replayed.
// Anything else (Set-Cookie above all) is never stored: a replay must not hand one client's
// cookie to another request.
var StoredHeaders = []string{"Content-Type", "Location"}

// IdempotencyRecord is one row of idempotency_keys. Business code does not use it directly: it
// holds an *IdempotencyKey, the owner's handle on a reserved row.
type IdempotencyRecord struct {
	ID              string `gorm:"primaryKey"`
	TenantID        string
	Key             string
	Principal       string
	Endpoint        string
	Fingerprint     string
	State           string
	RecoveryPoint   string
	LockToken       *string
	LockedAt        *time.Time
	RequestParams   string
	ResponseStatus  *int
	ResponseHeaders *string
	ResponseBody    []byte
	Attempts        int
	OrderID         *string
	PaymentID       *string
	CreatedAt       time.Time
	UpdatedAt       time.Time
	CompletedAt     *time.Time
}

// TableName tells GORM the table's name.
func (IdempotencyRecord) TableName() string { return "idempotency_keys" }

// Response is an HTTP answer prepared before it is written: an operation renders one, its key
// stores it, and it is sent — the first time and on every replay — byte for byte. Only the
// StoredHeaders of Header are ever kept.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Outcome says what Reserve found.
type Outcome int

const (
	// Reserved: the caller owns the key (new, or taken over) and must run the operation.
	Reserved Outcome = iota
	// Replay: the key is completed; answer Response and run nothing.
	Replay
	// InProgress: another request holds a live lease; answer 409 and retry after RetryAfter.
	InProgress
	// Mismatch: the key was made by another principal, for another endpoint or with other
	// parameters; answer 422 and reveal nothing of the original.
	Mismatch
)

// String names the outcome, for logs and tests.
func (o Outcome) String() string {
	return [...]string{"reserved", "replay", "in_progress", "mismatch"}[o]
}

// ReserveRequest is what identifies one operation under a key.
type ReserveRequest struct {
	TenantID    string
	Key         string
	Principal   string
	Endpoint    string
	Fingerprint string
	Params      []byte // canonical significant parameters (JSON), stored for a completer
	// Lease is how long an owner may go silent before a takeover. It judges the existing
	// owner's lease too, so every request of a deployment must use the same value
	// (IDEMPOTENCY_LEASE); changing it takes effect for all keys at once.
	Lease time.Duration
	// Deferred asks Reserve to write nothing for a fresh key: the operation's first
	// transaction inserts it (IdempotencyKey.Transaction). The shop's middleware sets it.
	Deferred bool
}

// Reservation is the answer of Reserve. Exactly one of Key (Reserved), Response (Replay) or
// RetryAfter (InProgress) is set, depending on Outcome.
type Reservation struct {
	Outcome    Outcome
	Key        OwnedKey
	Response   *Response
	RetryAfter time.Duration
}

// IdempotencyStore reserves, completes and reaps idempotency keys.
type IdempotencyStore struct{ db *gorm.DB }

// NewIdempotencyStore returns an IdempotencyStore on db.
func NewIdempotencyStore(db *gorm.DB) *IdempotencyStore { return &IdempotencyStore{db: db} }

// now is the store's clock: UTC, truncated to the microseconds PostgreSQL keeps, so a value
// read back equals the value written on both dialects. On SQLite times are stored as text in
// one fixed UTC format, so comparing them as strings orders them correctly.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// Reserve takes the key for the caller, or says why it cannot.
//
// It first tries ONE atomic INSERT … ON CONFLICT (tenant_id, key) DO NOTHING. If a row was
// inserted, the caller owns a new key. If not, someone made the key before; Reserve reads the
// row and decides: another principal, endpoint or fingerprint → Mismatch; completed → Replay;
// a live lease → InProgress; an expired lease or a released key (lock_token NULL) → a
// compare-and-set takeover, after which the caller owns the key and resumes from its
// RecoveryPoint. If the row vanished between the two statements (deleted after a validation
// error) or the takeover lost a race, it tries again, a bounded number of times.
//
// With req.Deferred (what the shop's middleware asks for) the order is the other way round:
// Reserve first only READS the key, and a key that has no row comes back Reserved but
// unwritten — its INSERT is the first statement of the operation's first transaction (see
// IdempotencyKey). That saves the reservation its own commit; the unique index still decides
// the owner, so it is exactly as atomic.
//
// Errors are infrastructure failures only (the database is unreachable, …).
func (s *IdempotencyStore) Reserve(ctx context.Context, req ReserveRequest) (*Reservation, error) {
	db := s.db.WithContext(ctx)
	for attempt := 0; attempt < 3; attempt++ {
		t := now()
		token := NewID("lease")
		row := IdempotencyRecord{
			ID: NewID("idk"), TenantID: req.TenantID, Key: req.Key, Principal: req.Principal,
			Endpoint: req.Endpoint, Fingerprint: req.Fingerprint, State: KeyInProgress,
			RecoveryPoint: RecoveryStarted, LockToken: &token, LockedAt: &t,
			RequestParams: string(req.Params), Attempts: 1, CreatedAt: t, UpdatedAt: t,
		}
		if req.Deferred {
			existing, err := s.read(db, req)
			if errors.Is(err, gorm.ErrRecordNotFound) {
				// Absent: ours to run, but nothing is written yet. The operation's first
				// transaction inserts the row; if another request inserted it first, that
				// transaction fails with ErrKeyTaken and the caller comes back here.
				return &Reservation{Outcome: Reserved, Key: newUnwrittenKey(s, &row, req.Lease)}, nil
			}
			if err != nil {
				return nil, err
			}
			if r, decided, err := s.decide(db, req, existing, token, t); decided || err != nil {
				return r, err
			}
			continue
		}

		res := db.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "tenant_id"}, {Name: "key"}},
			DoNothing: true,
		}).Create(&row)
		if res.Error != nil {
			return nil, fmt.Errorf("reserve idempotency key: %w", res.Error)
		}
		if res.RowsAffected == 1 {
			return &Reservation{Outcome: Reserved, Key: newKeyHandle(s, &row, req.Lease)}, nil
		}

		// Someone made this key before us: read it and decide.
		existing, err := s.read(db, req)
		if errors.Is(err, gorm.ErrRecordNotFound) {
			continue // deleted in between (a validation error freed it): reserve again
		}
		if err != nil {
			return nil, err
		}
		if r, decided, err := s.decide(db, req, existing, token, t); decided || err != nil {
			return r, err
		}
		// Another request took it over (or completed it) between our read and our update:
		// go round again and read what it did.
	}
	// Three rounds lost to other requests: somebody is actively working on this key.
	return &Reservation{Outcome: InProgress, RetryAfter: time.Second}, nil
}

// read returns the row of req's key, or gorm.ErrRecordNotFound.
func (s *IdempotencyStore) read(db *gorm.DB, req ReserveRequest) (*IdempotencyRecord, error) {
	var existing IdempotencyRecord
	err := db.Where("tenant_id = ? AND key = ?", req.TenantID, req.Key).Take(&existing).Error
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("read idempotency key: %w", err)
	}
	return &existing, err
}

// decide answers a request whose key exists: Mismatch, Replay, InProgress, or a takeover
// (Reserved). decided is false when the takeover lost a race and the caller must look again.
func (s *IdempotencyStore) decide(db *gorm.DB, req ReserveRequest, existing *IdempotencyRecord, token string, t time.Time) (r *Reservation, decided bool, err error) {
	if existing.Principal != req.Principal || existing.Endpoint != req.Endpoint || existing.Fingerprint != req.Fingerprint {
		return &Reservation{Outcome: Mismatch}, true, nil
	}
	if existing.State == KeyCompleted {
		resp, err := existing.storedResponse()
		if err != nil {
			return nil, true, err
		}
		return &Reservation{Outcome: Replay, Response: resp}, true, nil
	}
	cutoff := t.Add(-req.Lease)
	if existing.LockToken != nil && existing.LockedAt != nil && existing.LockedAt.After(cutoff) {
		return &Reservation{Outcome: InProgress, RetryAfter: existing.LockedAt.Sub(cutoff)}, true, nil
	}

	// The owner released the key (lock_token NULL) or went silent for a whole lease: take
	// it over, but only if it is still in that state when our UPDATE runs. Two requests
	// racing here both read the same row; the WHERE clause lets exactly one of them win.
	res := db.Model(&IdempotencyRecord{}).
		Where("id = ? AND state = ? AND (lock_token IS NULL OR locked_at < ?)", existing.ID, KeyInProgress, cutoff).
		Updates(map[string]any{"lock_token": token, "locked_at": t, "updated_at": t,
			"attempts": gorm.Expr("attempts + 1")})
	if res.Error != nil {
		return nil, true, fmt.Errorf("take over idempotency key: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return nil, false, nil
	}
	existing.LockToken, existing.LockedAt, existing.UpdatedAt = &token, &t, t
	existing.Attempts++
	return &Reservation{Outcome: Reserved, Key: newKeyHandle(s, existing, req.Lease)}, true, nil
}

func (r *IdempotencyRecord) storedResponse() (*Response, error) {
	resp := &Response{Status: *r.ResponseStatus, Header: http.Header{}, Body: r.ResponseBody}
	if r.ResponseHeaders != nil {
		var h map[string]string
		if err := json.Unmarshal([]byte(*r.ResponseHeaders), &h); err != nil {
			return nil, fmt.Errorf("decode stored headers of idempotency key %s: %w", r.ID, err)
		}
		for k, v := range h {
			resp.Header.Set(k, v)
		}
	}
	return resp, nil
}

// Reap deletes completed keys whose completion is older than retention, batchSize rows per
// statement so that a large backlog never holds a long lock. It never deletes a key in
// progress: its outcome is unknown, and forgetting it would let a retry run the operation a
// second time. It returns how many keys it deleted.
func (s *IdempotencyStore) Reap(ctx context.Context, at time.Time, retention time.Duration, batchSize int) (int64, error) {
	cutoff := at.UTC().Add(-retention)
	var total int64
	for {
		// A subquery picks one batch by id; the outer WHERE repeats the conditions so the
		// statement is safe on its own.
		batch := s.db.Model(&IdempotencyRecord{}).Select("id").
			Where("state = ? AND completed_at < ?", KeyCompleted, cutoff).Order("completed_at").Limit(batchSize)
		res := s.db.WithContext(ctx).Where("id IN (?) AND state = ? AND completed_at < ?", batch, KeyCompleted, cutoff).
			Delete(&IdempotencyRecord{})
		if res.Error != nil {
			return total, fmt.Errorf("reap idempotency keys: %w", res.Error)
		}
		total += res.RowsAffected
		if res.RowsAffected < int64(batchSize) {
			return total, nil
		}
	}
}

// ListStale returns up to limit keys still in progress whose last sign of life (a lease
// renewal, a release) is older than olderThan: operations whose outcome is unknown and which
// nobody is working on, of tenantID ("" for every tenant). The reconciliation report shows
// them, so an unfinished operation is never forgotten silently; a completer may resume them.
func (s *IdempotencyStore) ListStale(ctx context.Context, tenantID string, at time.Time, olderThan time.Duration, limit int) ([]IdempotencyRecord, error) {
	var rows []IdempotencyRecord
	q := s.db.WithContext(ctx).Where("state = ? AND updated_at < ?", KeyInProgress, at.UTC().Add(-olderThan))
	if tenantID != "" {
		q = q.Where("tenant_id = ?", tenantID)
	}
	err := q.Order("updated_at").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list stale idempotency keys: %w", err)
	}
	return rows, nil
}

// Get returns the tenant's record for key, or ErrNotFound. Tests and reports use it.
func (s *IdempotencyStore) Get(ctx context.Context, tenantID, key string) (*IdempotencyRecord, error) {
	var r IdempotencyRecord
	err := s.db.WithContext(ctx).Where("tenant_id = ? AND key = ?", tenantID, key).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get idempotency key: %w", err)
	}
	return &r, nil
}
