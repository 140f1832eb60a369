package models

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
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
	JournalExpiry        = "expiry"      // an unpaid order expired and gave its stock back
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
	// Repeats counts the later events just like this one — a key's replays, 409s or 422s past
	// JournalRepeatRows of them — that were counted here rather than written; LastAt is when
	// the latest of them happened. Zero and nil for every other event.
	Repeats int
	LastAt  *time.Time
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
	// Writes are not cancelled with ctx: a batch taken off the queue when the shop stops is
	// written rather than lost.
	write := context.WithoutCancel(ctx)
	for {
		select {
		case <-ctx.Done():
			s.running.Store(false)
			s.flush(write)
			return
		case <-t.C:
			s.flush(write)
		}
	}
}

// flush writes every queued event, journalBatch rows per statement.
func (s *JournalStore) flush(ctx context.Context) {
	for {
		evs := make([]JournalEvent, 0, journalBatch)
	fill:
		for len(evs) < journalBatch {
			select {
			case ev := <-s.queue:
				evs = append(evs, ev)
			default:
				break fill
			}
		}
		if len(evs) == 0 {
			return
		}
		if err := s.write(s.db.WithContext(ctx), evs); err != nil {
			s.logger.WarnContext(ctx, "journal write failed", "events", len(evs), "err", err)
		}
	}
}

// JournalRepeatRows bounds how many rows one key keeps of one answer a client can make the
// shop give again and again: a replay, a 409 in progress, a 422 mismatch. Past it, each one
// is counted on the last such row (Repeats, LastAt) instead of written, so a client that
// retries for ever cannot grow an order's journal for ever. Several shop processes each
// decide for themselves, so the bound can be passed by a row or two per process.
//
// It is 1: the order page needs to show THAT the client came back and got the stored answer
// (or a 409, or a 422), how often and when last — "replayed: the stored answer 201, nothing
// ran (and 18 more like it, the last at …)" — not a row per retry. So after its first, a
// replay costs no row: the middleware's Record only queues it (Run), and the queued repeats
// of a key are counted with one UPDATE per batch, however many there were. The metric
// checkoutlab_idempotency_outcomes_total{outcome="replayed"} counts every one.
const JournalRepeatRows = 1

// repeatKey names the events of one key that repeat one answer.
type repeatKey struct{ tenant, key, kind, outcome string }

// repeatKeyOf reports whether ev is an answer a client can repeat at will, and which.
func repeatKeyOf(ev JournalEvent) (repeatKey, bool) {
	if ev.Kind != JournalReservation || ev.IdempotencyKey == "" {
		return repeatKey{}, false
	}
	outcome, _, _ := strings.Cut(ev.Detail, ":")
	switch outcome {
	case "replayed", "in_progress", "mismatch":
		return repeatKey{ev.TenantID, ev.IdempotencyKey, ev.Kind, outcome}, true
	}
	return repeatKey{}, false
}

// sameAnswer selects the stored rows of k.
func (k repeatKey) sameAnswer(db *gorm.DB) *gorm.DB {
	prefix := k.outcome + ":"
	return db.Model(&JournalEvent{}).Where("tenant_id = ? AND idempotency_key = ? AND kind = ? AND substr(detail, 1, ?) = ?",
		k.tenant, k.key, k.kind, len(prefix), prefix)
}

// write appends evs in order: every event as a row, except repeated answers past
// JournalRepeatRows, which are counted on the last row of their answer.
func (s *JournalStore) write(db *gorm.DB, evs []JournalEvent) error {
	type fold struct {
		n      int
		lastAt time.Time
	}
	rows := make([]map[string]any, 0, len(evs))
	kept := map[repeatKey]int{} // rows of each answer, stored or about to be
	folds := map[repeatKey]*fold{}
	var order []repeatKey
	for _, ev := range evs {
		k, repeats := repeatKeyOf(ev)
		if !repeats {
			rows = append(rows, ev.row())
			continue
		}
		n, seen := kept[k]
		if !seen {
			var stored int64
			if err := k.sameAnswer(db).Count(&stored).Error; err != nil {
				return fmt.Errorf("count repeated journal events: %w", err)
			}
			n = int(stored)
		}
		if n < JournalRepeatRows {
			kept[k] = n + 1
			rows = append(rows, ev.row())
			continue
		}
		kept[k] = n
		f := folds[k]
		if f == nil {
			f = &fold{}
			folds[k] = f
			order = append(order, k)
		}
		f.n++
		f.lastAt = ev.At
		if f.lastAt.IsZero() {
			f.lastAt = now()
		}
	}
	for start := 0; start < len(rows); start += journalBatch {
		batch := rows[start:min(start+journalBatch, len(rows))]
		if err := db.Table(JournalEvent{}.TableName()).Create(batch).Error; err != nil {
			return fmt.Errorf("record journal events: %w", err)
		}
	}
	for _, k := range order {
		f := folds[k]
		last := k.sameAnswer(db).Select("MAX(id)")
		err := db.Model(&JournalEvent{}).Where("id = (?)", last).
			Updates(map[string]any{"repeats": gorm.Expr("repeats + ?", f.n), "last_at": f.lastAt.UTC()}).Error
		if err != nil {
			return fmt.Errorf("count repeated journal events: %w", err)
		}
	}
	return nil
}

// RecordTx appends evs inside tx, the transaction of the phase they describe, so the events
// and the work commit together or not at all. Several events are written by one INSERT
// (journalBatch rows at most), so a transaction that records many — the expiry of a batch of
// orders — pays one statement, not one per event. An error means tx is unusable: return it.
func (s *JournalStore) RecordTx(tx *gorm.DB, evs ...JournalEvent) error {
	rows := make([]map[string]any, 0, len(evs))
	for i := range evs {
		rows = append(rows, evs[i].row())
	}
	for start := 0; start < len(rows); start += journalBatch {
		batch := rows[start:min(start+journalBatch, len(rows))]
		if err := tx.Table(JournalEvent{}.TableName()).Create(batch).Error; err != nil {
			return fmt.Errorf("record journal event: %w", err)
		}
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
	if err := s.write(s.db.WithContext(context.WithoutCancel(ctx)), []JournalEvent{ev}); err != nil {
		s.logger.WarnContext(ctx, "journal write failed", "tenant", ev.TenantID, "order_id", ev.OrderID,
			"kind", ev.Kind, "err", err)
	}
}

// ForOrder returns the journal of an order, oldest first: the events about the order, and
// every event of the idempotency keys that worked on it — including those written before the
// order existed (the first reservation) or after (a replay), the queued ones included.
func (s *JournalStore) ForOrder(ctx context.Context, orderID string) ([]JournalEvent, error) {
	q, err := s.orderJournal(ctx, orderID)
	if err != nil {
		return nil, err
	}
	var evs []JournalEvent
	if err := q.Order("at, id").Find(&evs).Error; err != nil {
		return nil, fmt.Errorf("journal of order: %w", err)
	}
	return evs, nil
}

// JournalPage is a slice of an order's journal: Events from Offset on, oldest first, out of
// Total events in all.
type JournalPage struct {
	Events []JournalEvent
	Offset int
	Total  int64
}

// ForOrderPage returns at most limit events of the order's journal (ForOrder's events, in
// its order), starting offset events in, with the total count, so a long journal can be
// shown a page at a time.
func (s *JournalStore) ForOrderPage(ctx context.Context, orderID string, offset, limit int) (JournalPage, error) {
	page := JournalPage{Offset: offset}
	q, err := s.orderJournal(ctx, orderID)
	if err != nil {
		return page, err
	}
	if err := q.Session(&gorm.Session{}).Count(&page.Total).Error; err != nil {
		return page, fmt.Errorf("count journal of order: %w", err)
	}
	if err := q.Order("at, id").Offset(offset).Limit(limit).Find(&page.Events).Error; err != nil {
		return page, fmt.Errorf("journal page of order: %w", err)
	}
	return page, nil
}

// orderJournal selects the events of an order's journal: those about the order, and every
// event of the idempotency keys that worked on it. It writes the queued events first, so that
// a page rendered now shows everything that has happened, the retry that settled the order
// included.
func (s *JournalStore) orderJournal(ctx context.Context, orderID string) (*gorm.DB, error) {
	s.flush(ctx)
	db := s.db.WithContext(ctx)
	var keys []JournalEvent
	if err := db.Model(&JournalEvent{}).Distinct("tenant_id", "idempotency_key").
		Where("order_id = ? AND idempotency_key IS NOT NULL", orderID).Find(&keys).Error; err != nil {
		return nil, fmt.Errorf("journal keys of order: %w", err)
	}
	q := db.Model(&JournalEvent{}).Where("order_id = ?", orderID)
	if len(keys) > 0 {
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = k.IdempotencyKey
		}
		// An order belongs to one tenant, so all its keys do too.
		q = q.Or("tenant_id = ? AND idempotency_key IN ?", keys[0].TenantID, names)
	}
	return q, nil
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
