// Package payments holds the checkout and payment operations, as sequences of atomic phases
// with recovery points, and the background work that keeps them tidy.
package payments

import (
	"context"
	"log/slog"
	"time"
)

// KeyReaper is what the reaper needs from the idempotency store.
type KeyReaper interface {
	Reap(ctx context.Context, now time.Time, retention time.Duration, batchSize int) (int64, error)
}

// ReapBatchSize is how many keys one DELETE removes: small, so that the reaper never holds a
// lock long enough to slow down checkouts.
const ReapBatchSize = 500

// RunReaper deletes completed idempotency keys older than retention every interval, until ctx
// ends. It never deletes a key in progress: an operation whose outcome is unknown is resolved
// by a retry or the completer, not forgotten. A failed round is logged and retried at the next
// tick. (A later issue moves this loop onto the job queue as a periodic job.)
func RunReaper(ctx context.Context, store KeyReaper, interval, retention time.Duration, logger *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := store.Reap(ctx, time.Now(), retention, ReapBatchSize)
		switch {
		case err != nil && ctx.Err() == nil:
			logger.WarnContext(ctx, "reap idempotency keys", "err", err)
		case n > 0:
			logger.InfoContext(ctx, "reaped idempotency keys", "deleted", n, "retention", retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
