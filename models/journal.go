package models

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
)

// Journal actors: who did what. They are the lanes of a timeline.
const (
	ActorClient    = "client"
	ActorShop      = "shop"
	ActorDatabase  = "database"
	ActorGateway   = "gateway"
	ActorWebhook   = "webhook"
	ActorOutbox    = "outbox"
	ActorCompleter = "completer"
)

// Journal event kinds. The detail starts with the decision or outcome (e.g. "reserved: …",
// "unknown: …"), so a reader, or a test, sees the answer first.
const (
	JournalReservation   = "reservation" // the key's answer: reserved, replayed, in_progress, mismatch
	JournalDisposition   = "disposition" // what the key kept: stored, forgotten, released
	JournalPhase         = "phase"       // a phase committed, with its recovery point
	JournalGatewayCharge = "charge"      // a charge and its classified outcome
	JournalGatewayLookup = "lookup"      // asking the gateway's ledger before charging again
	JournalWebhook       = "delivery"    // a delivery and its decision, duplicates included
	JournalReceipt       = "receipt"     // outbox delivery: delivered or deduplicated
	JournalShipment      = "shipment"    // outbox delivery: delivered or deduplicated
	JournalClaim         = "claim"       // the completer took over an abandoned operation
	JournalCompleted     = "completion"  // what the completer's attempt came to
	// Things done to the shop rather than by it; the failure lab records them in its runs.
	JournalCrash  = "crash"  // the process was killed at a crash point
	JournalReaper = "reaper" // the reaper deleted completed keys
)

// JournalEvent is one line of an operation's journal. Empty IdempotencyKey, OrderID and
// PaymentID are stored as NULL. Detail is for humans and must never hold a card number, an
// e-mail address or a secret.
type JournalEvent struct {
	ID             int64 `gorm:"primaryKey"`
	TenantID       string
	IdempotencyKey string
	OrderID        string
	PaymentID      string
	Actor          string
	Kind           string
	Detail         string
	At             time.Time
}

// TableName tells GORM the table's name.
func (JournalEvent) TableName() string { return "journal_events" }

func (ev *JournalEvent) row() map[string]any {
	null := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	at := ev.At
	if at.IsZero() {
		at = now()
	}
	return map[string]any{"tenant_id": ev.TenantID, "idempotency_key": null(ev.IdempotencyKey),
		"order_id": null(ev.OrderID), "payment_id": null(ev.PaymentID),
		"actor": ev.Actor, "kind": ev.Kind, "detail": ev.Detail, "at": at}
}

// JournalStore appends to and reads the journal.
//
// Events written inside a business transaction (RecordTx) commit with it. The others
// (Record) would each cost a commit of their own — on PostgreSQL a disk flush — on the hot path
// of every idempotent request, replays included. So while Run is running they are queued and
// written in batches, one commit for many events; protection stays almost free. Without Run
// (tests, tools), Record writes at once.
type JournalStore struct {
	db      *gorm.DB
	logger  *slog.Logger
	queue   chan JournalEvent
	running atomic.Bool

	// WriteThrough writes every event at once, as without Run. A shop that may be killed at a
	// crash point sets it: queued events would die with the process, and the journal would
	// hide what the killed request did.
	WriteThrough bool
}

// NewJournalStore returns a JournalStore on db that reports failed writes to logger
// (slog.Default if nil).
func NewJournalStore(db *gorm.DB, logger *slog.Logger) *JournalStore {
	if logger == nil {
		logger = slog.Default()
	}
	return &JournalStore{db: db, logger: logger, queue: make(chan JournalEvent, 4096)}
}

// journalBatch is the most events one INSERT writes.
const journalBatch = 200

// Run writes the events Record queues, in batches, until ctx ends, then writes what is left.
// Events keep the time they were recorded at, and the journal is read in that order.
func (s *JournalStore) Run(ctx context.Context) {
	s.running.Store(true)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.running.Store(false)
			s.flush(context.WithoutCancel(ctx))
			return
		case <-t.C:
			s.flush(ctx)
		}
	}
}

// flush writes every queued event, journalBatch rows per statement.
func (s *JournalStore) flush(ctx context.Context) {
	for {
		rows := make([]map[string]any, 0, journalBatch)
	fill:
		for len(rows) < journalBatch {
			select {
			case ev := <-s.queue:
				rows = append(rows, ev.row())
			default:
				break fill
			}
		}
		if len(rows) == 0 {
			return
		}
		if err := s.db.WithContext(ctx).Table(JournalEvent{}.TableName()).Create(rows).Error; err != nil {
			s.logger.WarnContext(ctx, "journal write failed", "events", len(rows), "err", err)
		}
	}
}

// RecordTx appends ev inside tx, the transaction of the phase it describes, so the event and
// the work commit together or not at all. An error means tx is unusable: return it.
func (s *JournalStore) RecordTx(tx *gorm.DB, ev JournalEvent) error {
	if err := tx.Table(ev.TableName()).Create(ev.row()).Error; err != nil {
		return fmt.Errorf("record journal event: %w", err)
	}
	return nil
}

// Record appends ev in a statement of its own, best effort: a failed write is logged and
// never fails the operation it describes. Never call it while a transaction is open on the
// same pool (SQLite has one connection): use RecordTx there.
func (s *JournalStore) Record(ctx context.Context, ev JournalEvent) {
	if ev.At.IsZero() {
		ev.At = now() // the moment it happened, not the moment the batch is written
	}
	if s.running.Load() && !s.WriteThrough {
		select {
		case s.queue <- ev:
			return
		default: // the queue is full: write this one now rather than lose it
		}
	}
	if err := s.RecordTx(s.db.WithContext(context.WithoutCancel(ctx)), ev); err != nil {
		s.logger.WarnContext(ctx, "journal write failed", "tenant", ev.TenantID, "order_id", ev.OrderID,
			"kind", ev.Kind, "err", err)
	}
}

// ForOrder returns the journal of an order, oldest first: the events about the order, and
// every event of the idempotency keys that worked on it — including those written before the
// order existed (the first reservation) or after (a replay).
//
// It writes the queued events first, so that a page rendered now shows everything that has
// happened, the retry that settled the order included.
func (s *JournalStore) ForOrder(ctx context.Context, orderID string) ([]JournalEvent, error) {
	s.flush(ctx)
	db := s.db.WithContext(ctx)
	var keys []JournalEvent
	if err := db.Model(&JournalEvent{}).Distinct("tenant_id", "idempotency_key").
		Where("order_id = ? AND idempotency_key IS NOT NULL", orderID).Find(&keys).Error; err != nil {
		return nil, fmt.Errorf("journal keys of order: %w", err)
	}
	q := db.Where("order_id = ?", orderID)
	if len(keys) > 0 {
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = k.IdempotencyKey
		}
		// An order belongs to one tenant, so all its keys do too.
		q = q.Or("tenant_id = ? AND idempotency_key IN ?", keys[0].TenantID, names)
	}
	var evs []JournalEvent
	if err := q.Order("at, id").Find(&evs).Error; err != nil {
		return nil, fmt.Errorf("journal of order: %w", err)
	}
	return evs, nil
}

// ForKey returns the journal of one idempotency key of a tenant, oldest first, the queued
// events included.
func (s *JournalStore) ForKey(ctx context.Context, tenantID, key string) ([]JournalEvent, error) {
	s.flush(ctx)
	var evs []JournalEvent
	err := s.db.WithContext(ctx).Where("tenant_id = ? AND idempotency_key = ?", tenantID, key).
		Order("at, id").Find(&evs).Error
	if err != nil {
		return nil, fmt.Errorf("journal of key: %w", err)
	}
	return evs, nil
}

// Prune deletes the events recorded before at minus retention, oldest first, batchSize rows
// per statement so that a large backlog never holds a long lock on a table that checkouts
// write to. It returns how many events it deleted, also when it stops early on an error.
// The orders and keys of the deleted events are untouched: only their history goes.
func (s *JournalStore) Prune(ctx context.Context, at time.Time, retention time.Duration, batchSize int) (int64, error) {
	cutoff := at.UTC().Add(-retention)
	db := s.db.WithContext(ctx)
	var total int64
	for {
		// A subquery picks one batch by id (LIMIT is not allowed on DELETE everywhere); the
		// outer WHERE repeats the condition so the statement is safe on its own.
		batch := db.Model(&JournalEvent{}).Select("id").Where("at < ?", cutoff).Order("at").Limit(batchSize)
		res := db.Where("id IN (?) AND at < ?", batch, cutoff).Delete(&JournalEvent{})
		if res.Error != nil {
			return total, fmt.Errorf("prune journal: %w", res.Error)
		}
		total += res.RowsAffected
		if res.RowsAffected < int64(batchSize) {
			return total, nil
		}
	}
}
