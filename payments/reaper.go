package payments

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
)

// KeyReaper is what the reaper needs from the idempotency store.
type KeyReaper interface {
	Reap(ctx context.Context, now time.Time, retention time.Duration, batchSize int) (int64, error)
}

// JournalPruner is what the reaper needs from the journal.
type JournalPruner interface {
	Prune(ctx context.Context, now time.Time, retention time.Duration, batchSize int) (int64, error)
}

// ReapBatchSize is how many keys, or journal events, one DELETE removes: small, so that the
// reaper never holds a lock long enough to slow down checkouts.
const ReapBatchSize = 500

// Reaper is the shop's housekeeping. It deletes completed idempotency keys older than
// Retention and, when Journal is set, journal events older than JournalRetention.
//
// It never deletes a key in progress: an operation whose outcome is unknown is resolved by a
// retry or the completer, and listed in the reconciliation report while it waits, never
// forgotten. Journal events are history only, so age alone decides: an old order keeps its
// rows and loses its "What happened".
type Reaper struct {
	Store     KeyReaper
	Retention time.Duration
	// Journal is optional; a nil Journal is never pruned. JournalRetention must then be
	// positive: a zero would prune the whole journal.
	Journal          JournalPruner
	JournalRetention time.Duration
	Logger           *slog.Logger
}

// Reaped counts what one reaper pass deleted.
type Reaped struct {
	Keys   int64 // completed idempotency keys
	Events int64 // journal events
}

// RunOnce deletes what has expired, in batches, and reports how many keys and journal events
// it deleted. The two are independent: a failure to reap keys does not stop the journal from
// being pruned, and the errors of both are returned joined.
func (r *Reaper) RunOnce(ctx context.Context) (Reaped, error) {
	at := time.Now()
	var got Reaped
	var keysErr, journalErr error
	got.Keys, keysErr = r.Store.Reap(ctx, at, r.Retention, ReapBatchSize)
	if got.Keys > 0 && r.Logger != nil {
		r.Logger.InfoContext(ctx, "reaped idempotency keys", "deleted", got.Keys, "retention", r.Retention)
	}
	switch {
	case r.Journal == nil:
	case r.JournalRetention <= 0:
		journalErr = errors.New("prune journal: JournalRetention must be positive")
	default:
		got.Events, journalErr = r.Journal.Prune(ctx, at, r.JournalRetention, ReapBatchSize)
		if got.Events > 0 && r.Logger != nil {
			r.Logger.InfoContext(ctx, "pruned journal events", "deleted", got.Events, "retention", r.JournalRetention)
		}
	}
	return got, errors.Join(keysErr, journalErr)
}

// ReapArgs is the periodic job that runs the reaper.
type ReapArgs struct{}

// Kind names the job in the queue. The name dates from when the reaper reaped keys only; it
// stays, so that jobs already queued by an older shop still find their worker.
func (ReapArgs) Kind() string { return "reap_idempotency_keys" }

// ReaperWorker runs Reaper.RunOnce as a River job.
type ReaperWorker struct {
	river.WorkerDefaults[ReapArgs]
	Reaper *Reaper
}

// Work runs one reaper pass.
func (w *ReaperWorker) Work(ctx context.Context, _ *river.Job[ReapArgs]) error {
	_, err := w.Reaper.RunOnce(ctx)
	return err
}
