package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// A duplicate request that asks to wait for its key's owner (Prefer: wait) has to learn when
// the owner is done. Within one process the idempotency middleware signals it directly. This
// file is for owners in other processes (the lab's replicas share one database):
//
//   - PostgreSQL: a waiting request marks the key awaited (AwaitKey); the owner's completion
//     and release then announce the key with pg_notify on the channel SettledChannel, and a
//     KeyListener in every process passes the announcements on to the requests it holds;
//   - SQLite has no notifications: a waiting request polls the key with KeySettled.
//
// Why only awaited keys: a NOTIFY takes a database-wide lock from the moment its transaction
// starts to commit until the commit is done, so transactions that notify commit one at a time.
// Measured with pgbench on this project's 2-core machine, 8 clients committing a one-row UPDATE
// reached 560–880 transactions per second, and 220–340 with a pg_notify in each. Announcing
// every key would put that lock on every checkout's last commit; this way only the keys that
// somebody waits for pay for it, once each.

// SettledChannel is the PostgreSQL notification channel on which completed and released keys
// are announced. The payload is {"tenant": …, "key": …}.
const SettledChannel = "idempotency_key_settled"

// settleTx is fenced (see IdempotencyKey) for a write that settles the key — its completion or
// its release — followed, inside the same tx, by the key's announcement if it is awaited.
// PostgreSQL delivers a notification only when its transaction commits, and never if it rolls
// back, so a listener never hears of an answer that does not exist, and the announcement adds
// no commit of its own.
func (k *IdempotencyKey) settleTx(tx *gorm.DB, what string, set map[string]any) error {
	if err := k.fenced(tx, what, set); err != nil {
		return err
	}
	return notifySettledTx(tx, k.id)
}

// notifySettledTx announces the key row id on SettledChannel, inside tx, if a request waits for
// it (awaited). The row names its tenant and key, which is what waiters know (the owner's
// handle knows neither). On SQLite it does nothing.
//
// The race with a request that marks the key awaited just now is safe: our settling UPDATE
// holds the row's lock until we commit, so its AwaitKey either committed before (and we see
// awaited) or waits for our commit and then finds the key settled, which it reads as such.
func notifySettledTx(tx *gorm.DB, id string) error {
	if Dialect(tx) != Postgres {
		return nil
	}
	err := tx.Exec("SELECT pg_notify(?, json_build_object('tenant', tenant_id, 'key', key)::text) FROM idempotency_keys WHERE id = ? AND awaited",
		SettledChannel, id).Error
	if err != nil {
		return fmt.Errorf("announce idempotency key: %w", err)
	}
	return nil
}

// inOneCommit runs fn in a transaction on PostgreSQL, so that a settling UPDATE and its
// announcement commit together, once. On SQLite, where nothing is announced, fn runs on db as
// it is: one statement, as before.
func inOneCommit(db *gorm.DB, fn func(tx *gorm.DB) error) error {
	if Dialect(db) != Postgres {
		return fn(db)
	}
	return db.Transaction(fn)
}

// AwaitKey marks tenantID's key awaited, so that its owner, in whichever process it runs,
// announces the key's completion or release (PostgreSQL; on SQLite, which cannot announce, it
// does nothing). The mark stays for the key's life: an owner that takes a released key over
// announces it too. A key already settled, or already awaited, is left alone.
func (s *IdempotencyStore) AwaitKey(ctx context.Context, tenantID, key string) error {
	if Dialect(s.db) != Postgres {
		return nil
	}
	err := s.db.WithContext(ctx).Exec("UPDATE idempotency_keys SET awaited = true WHERE tenant_id = ? AND key = ? AND state = ? AND NOT awaited",
		tenantID, key, KeyInProgress).Error
	if err != nil {
		return fmt.Errorf("mark idempotency key awaited: %w", err)
	}
	return nil
}

// KeySettled reports whether a request waiting for tenantID's key may stop waiting: the key
// is completed, released by its owner, absent (forgotten after a validation error), or its
// owner has been silent for a whole lease (crashed: a retry may take the key over). It only
// reads, so that waiters polling an SQLite file never take its write lock.
func (s *IdempotencyStore) KeySettled(ctx context.Context, tenantID, key string, lease time.Duration) (bool, error) {
	var row IdempotencyRecord
	err := s.db.WithContext(ctx).Select("state", "lock_token", "locked_at").
		Where("tenant_id = ? AND key = ?", tenantID, key).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read idempotency key: %w", err)
	}
	live := row.State == KeyInProgress && row.LockToken != nil && row.LockedAt != nil &&
		row.LockedAt.After(now().Add(-lease))
	return !live, nil
}

// KeyListener holds one PostgreSQL connection of its own that LISTENs on SettledChannel, and
// calls Wake for each key announced: the requests this process holds for that key look at it
// again. Build it with NewKeyListener and Run it for the life of the process.
type KeyListener struct {
	dsn string
	// Wake is called with each announced key.
	Wake func(tenantID, key string)
	// WakeAll is called each time the listener (re)connects: announcements made while it was
	// not listening are lost, so every waiting request should look at its key again.
	WakeAll func()
	Logger  *slog.Logger // optional
}

// NewKeyListener returns a listener on db's PostgreSQL database, or nil on SQLite, which has
// no notifications.
func NewKeyListener(db *gorm.DB, wake func(tenantID, key string), wakeAll func(), logger *slog.Logger) *KeyListener {
	d, ok := db.Dialector.(*postgres.Dialector)
	if !ok || d.Config == nil || d.DSN == "" {
		return nil
	}
	return &KeyListener{dsn: d.DSN, Wake: wake, WakeAll: wakeAll, Logger: logger}
}

// Run listens until ctx ends. On a lost connection it reconnects, waiting 100 ms the first
// time and twice as long after each failure in a row, up to 5 s.
func (l *KeyListener) Run(ctx context.Context) {
	const first, most = 100 * time.Millisecond, 5 * time.Second
	backoff := first
	for ctx.Err() == nil {
		connected, err := l.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if connected {
			backoff = first
		}
		if l.Logger != nil {
			l.Logger.Warn("idempotency key listener: reconnecting", "err", err, "after", backoff)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, most)
	}
}

// listen connects, LISTENs and passes announcements on until an error (or ctx) ends it. It
// reports whether it got as far as listening.
func (l *KeyListener) listen(ctx context.Context) (connected bool, err error) {
	conn, err := pgx.Connect(ctx, l.dsn)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+SettledChannel); err != nil {
		return false, err
	}
	if l.WakeAll != nil {
		l.WakeAll()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		var p struct{ Tenant, Key string }
		if json.Unmarshal([]byte(n.Payload), &p) == nil && l.Wake != nil {
			l.Wake(p.Tenant, p.Key)
		}
	}
}
