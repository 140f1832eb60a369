package payments

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
)

// KeyReaper is what the reaper needs from the idempotency store.
type KeyReaper interface {
	Reap(ctx context.Context, now time.Time, retention time.Duration, batchSize int) (int64, error)
}

// ReapBatchSize is how many keys one DELETE removes: small, so that the reaper never holds a
// lock long enough to slow down checkouts.
const ReapBatchSize = 500

// Reaper deletes completed idempotency keys older than Retention. It never deletes a key in
// progress: an operation whose outcome is unknown is resolved by a retry or the completer, and
// listed in the reconciliation report while it waits, never forgotten.
type Reaper struct {
	Store     KeyReaper
	Retention time.Duration
	Logger    *slog.Logger
}

// RunOnce deletes what has expired, in batches, and reports how many keys it deleted.
func (r *Reaper) RunOnce(ctx context.Context) (int64, error) {
	n, err := r.Store.Reap(ctx, time.Now(), r.Retention, ReapBatchSize)
	if n > 0 && r.Logger != nil {
		r.Logger.InfoContext(ctx, "reaped idempotency keys", "deleted", n, "retention", r.Retention)
	}
	return n, err
}

// ReapArgs is the periodic job that runs the reaper.
type ReapArgs struct{}

// Kind names the job in the queue.
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
