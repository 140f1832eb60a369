package payments

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"gorm.io/gorm"

	"checkoutlab/models"
)

// DefaultOrderHold is how long an unpaid order keeps its stock after its last attempt
// (ORDER_HOLD): long enough to fetch another card, short enough that an abandoned order — or
// one shopper with a card that is always declined — cannot keep a limited product off sale.
const DefaultOrderHold = 30 * time.Minute

// ExpiryBatchSize is how many orders one expiry transaction takes: small, so that giving
// stock back never holds product rows long enough to slow down checkouts.
const ExpiryBatchSize = 200

// OrderExpirer is what the expiry needs from the order store. *models.OrderStore is one.
type OrderExpirer interface {
	ExpireUnpaidOrders(ctx context.Context, cutoff time.Time, limit int,
		finish func(tx *gorm.DB, expired []models.ExpiredOrder) error) ([]models.ExpiredOrder, error)
}

// Expiry gives back the stock of orders nobody is paying for. An order that is not paid
// within Hold of its last unsuccessful attempt — placed and never paid, or declined and never
// paid with another card — becomes expired, its stock back on sale, in one transaction;
// paying it afterwards answers 409 order_expired. An order with a payment whose outcome is
// not known yet never expires: it may yet be paid (see models.ExpireUnpaidOrders).
type Expiry struct {
	Orders OrderExpirer
	Hold   time.Duration
	// Journal, if set, records each expiry on the order's journal, in the same transaction.
	Journal Journal
	Logger  *slog.Logger
}

// RunOnce expires every order past its hold, ExpiryBatchSize per transaction, and returns how
// many it expired.
func (x *Expiry) RunOnce(ctx context.Context) (int, error) {
	if x.Hold <= 0 {
		return 0, fmt.Errorf("order expiry: Hold must be positive, got %s", x.Hold)
	}
	cutoff := time.Now().Add(-x.Hold)
	// The batch's events are written by one INSERT, in the transaction that expires it.
	journal := func(tx *gorm.DB, expired []models.ExpiredOrder) error {
		evs := make([]models.JournalEvent, 0, len(expired))
		for _, o := range expired {
			evs = append(evs, models.JournalEvent{TenantID: o.TenantID, OrderID: o.ID,
				Actor: models.ActorShop, Kind: models.JournalExpiry,
				Detail: fmt.Sprintf("expired: not paid within %s of its last attempt; %d units back in stock", x.Hold, o.Units)})
		}
		return recordTx(x.Journal, tx, evs...)
	}
	total := 0
	for {
		expired, err := x.Orders.ExpireUnpaidOrders(ctx, cutoff, ExpiryBatchSize, journal)
		total += len(expired)
		if err != nil {
			return total, err
		}
		if len(expired) > 0 && x.Logger != nil {
			x.Logger.InfoContext(ctx, "expired unpaid orders", "expired", len(expired), "hold", x.Hold)
		}
		if len(expired) < ExpiryBatchSize {
			return total, nil
		}
	}
}

// ExpireArgs is the periodic job that runs the expiry.
type ExpireArgs struct{}

// Kind names the job in the queue.
func (ExpireArgs) Kind() string { return "expire_unpaid_orders" }

// ExpiryWorker runs Expiry.RunOnce as a River job.
type ExpiryWorker struct {
	river.WorkerDefaults[ExpireArgs]
	Expiry *Expiry
}

// Work runs one expiry pass.
func (w *ExpiryWorker) Work(ctx context.Context, _ *river.Job[ExpireArgs]) error {
	_, err := w.Expiry.RunOnce(ctx)
	return err
}

// ExpiryInterval is how often the expiry runs for a hold: a tenth of it, so an order expires
// at most 10% late, between once a second and once a minute.
func ExpiryInterval(hold time.Duration) time.Duration {
	return min(max(hold/10, time.Second), time.Minute)
}

// ExpiryPeriodicJob schedules the expiry every ExpiryInterval(hold), and once at start. Like
// the reaper, River runs it on its elected leader only, so several shop processes on one
// database do not all run it.
func ExpiryPeriodicJob(hold time.Duration) *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(ExpiryInterval(hold)),
		func() (river.JobArgs, *river.InsertOpts) { return ExpireArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true})
}
