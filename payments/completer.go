package payments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"checkoutlab/models"
)

// Claimer finds abandoned operations and takes them over. *models.IdempotencyStore is one.
type Claimer interface {
	ClaimAbandoned(ctx context.Context, endpoints []string, lease time.Duration, limit int, skipTenants []string) ([]models.ClaimedKey, error)
}

// DefaultCompleterBatch is how many operations a completer pass takes on at most
// (COMPLETER_BATCH).
const DefaultCompleterBatch = 20

// Completer finishes operations whose owner is gone — a crashed process, or a client that got
// a 5xx and never retried — so every order reaches a final state even if nobody asks again.
// It is the same code as a client retry: it resumes from the recovery point, asks the gateway
// before charging, and stores the answer, which a later retry gets replayed.
type Completer struct {
	Keys    Claimer
	Service *Service
	// Endpoints are the endpoints whose abandoned keys it finishes (method and route, as the
	// idempotency middleware records them), each with the operation it runs.
	Endpoints map[string]Operation
	Lease     time.Duration
	// Batch bounds the operations one pass takes on (0: DefaultCompleterBatch).
	Batch  int
	Logger *slog.Logger
}

// RunOnce claims up to a batch of abandoned operations and drives each to a final state. It
// returns how many it finished. An operation whose outcome is still unknown (the gateway did
// not answer) is released again for the next pass; nothing is ever expired silently.
//
// Tenants take turns: each claim skips the tenants already served in this round, oldest
// abandoned operation first, and a new round starts when every tenant with work has had one.
// So a tenant with a thousand stuck operations cannot hold back another tenant's one.
func (c *Completer) RunOnce(ctx context.Context) (int, error) {
	done := 0
	endpoints := slices.Sorted(maps.Keys(c.Endpoints))
	batch := c.Batch
	if batch <= 0 {
		batch = DefaultCompleterBatch
	}
	var served []string // the tenants that had a turn in this round
	// One key at a time: a claimed key's lease starts when it is claimed, and finishing one
	// operation may take two gateway timeouts, so a batch claimed at once could outlive its
	// lease while it waits its turn.
	for range batch {
		claimed, err := c.Keys.ClaimAbandoned(ctx, endpoints, c.Lease, 1, served)
		if err == nil && len(claimed) == 0 && len(served) > 0 {
			served = nil // every tenant with work had its turn: the next round
			claimed, err = c.Keys.ClaimAbandoned(ctx, endpoints, c.Lease, 1, nil)
		}
		if err != nil || len(claimed) == 0 {
			return done, err
		}
		ck := claimed[0]
		served = append(served, ck.TenantID)
		log := c.log().With("tenant", ck.TenantID, "endpoint", ck.Endpoint, "idempotency_key", ck.Key.Key(), "attempt", ck.Key.Attempts())
		ev := models.JournalEvent{TenantID: ck.TenantID, IdempotencyKey: ck.Key.Key(), OrderID: ck.Key.OrderID(),
			PaymentID: ck.Key.PaymentID(), Actor: models.ActorCompleter}
		journal := func(kind, detail string) {
			ev.Kind, ev.Detail = kind, detail
			record(c.Service.Journal, ctx, ev)
		}
		journal(models.JournalClaim, fmt.Sprintf("claimed: abandoned at %s, attempt %d", ck.Key.RecoveryPoint(), ck.Key.Attempts()))
		if ck.Key.RecoveryPoint() == PointStarted {
			// The owner died before its first phase committed: there is no order, no payment
			// and no charge. Forget the key, exactly as if the request had never arrived; a
			// retry by the client starts the operation afresh.
			if _, err := ck.Key.Delete(ctx); err != nil {
				log.WarnContext(ctx, "completer: drop unstarted operation", "err", err)
				continue
			}
			log.InfoContext(ctx, "completer: dropped an operation that never started")
			journal(models.JournalCompleted, "dropped: the operation never started; the key is forgotten")
			done++
			continue
		}
		if _, err := c.Service.charge(ctx, ck.Key, c.Endpoints[ck.Endpoint], true, nil); err != nil {
			log.WarnContext(ctx, "completer: operation still unresolved", "err", err)
			journal(models.JournalCompleted, "unresolved: "+errorCode(err)+"; released for the next pass")
			if !errors.Is(err, models.ErrLeaseLost) {
				if rerr := ck.Key.Release(ctx); rerr != nil && !errors.Is(rerr, models.ErrLeaseLost) {
					log.WarnContext(ctx, "completer: release", "err", rerr)
				}
			}
			continue
		}
		log.InfoContext(ctx, "completer: finished an abandoned operation", "order_id", ck.Key.OrderID(), "payment_id", ck.Key.PaymentID())
		journal(models.JournalCompleted, "finished: the answer is stored; a retry gets it replayed")
		done++
	}
	return done, nil
}

// errorCode is the code of a domain error, for the journal: never the raw error text.
func errorCode(err error) string {
	var e *models.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return models.ErrInternal.Code
}

func (c *Completer) log() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// Run runs a completer pass every interval until ctx ends.
//
// Unlike the reaper, the completer is not a River periodic job. River schedules periodic jobs
// only on its elected leader, and after a crash the dead leader's lease keeps the others from
// taking over for up to fifteen seconds — exactly when the completer is needed. So every shop
// process runs its own completer; claims are compare-and-set, so replicas never finish the
// same operation twice.
func (c *Completer) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := c.RunOnce(ctx); err != nil && ctx.Err() == nil {
			c.log().WarnContext(ctx, "completer pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
