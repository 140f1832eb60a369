package idempotency

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"checkoutlab/models"
)

// renewer keeps an owned key's lease alive while the handler works, so that a slow but live
// request keeps its key while a crashed one loses it within one lease.
type renewer struct {
	stopc chan struct{}
	done  chan struct{}
	lost  atomic.Bool
}

// startRenewer renews key every lease/3 until stop. If a renewal finds the lease lost (another
// request took the key over after we went silent too long), it cancels the request's context,
// so the handler stops at its next database call instead of working for nothing; its writes
// would be refused by the fence anyway.
func startRenewer(ctx context.Context, key models.OwnedKey, cancel context.CancelFunc) *renewer {
	r := &renewer{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		t := time.NewTicker(max(key.Lease()/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-r.stopc:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if err := key.Renew(ctx); errors.Is(err, models.ErrLeaseLost) {
					r.lost.Store(true)
					cancel()
					return
				}
				// Any other error (the database hiccupped): try again next tick; the lease
				// lasts three ticks.
			}
		}
	}()
	return r
}

// stop ends the renewals and reports whether the lease was lost meanwhile. A renewal that
// runs after the handler completed the key also "loses" (the key is no longer in progress);
// the caller checks completion first.
func (r *renewer) stop() bool {
	close(r.stopc)
	<-r.done
	return r.lost.Load()
}
