package payments_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
)

// TestExpiryJob: with a short ORDER_HOLD, the periodic job that cmd/shop schedules expires an
// order nobody paid — declined, then abandoned — gives its stock back and journals why, on a
// real River queue.
func TestExpiryJob(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		ctx := context.Background()
		if err := payments.MigrateJobQueue(ctx, db); err != nil {
			t.Fatal(err)
		}
		orders := models.NewOrderStore(db)
		journal := models.NewJournalStore(db, nil)
		o, err := orders.Create(ctx, models.NewOrder{TenantID: "acme", Email: "ada@example.com",
			Items:    []models.Item{{SKU: "brass-compass", Quantity: 5}},
			Shipping: models.Address{Name: "Ada Lovelace", Address: "1 Analytical Way", City: "London", PostalCode: "N1 9GU", Country: "GB"}})
		if err != nil {
			t.Fatal(err)
		}
		modelstest.MustSettledPayment(t, db, o, models.PaymentFailed, "card_declined")

		const hold = 2 * time.Second
		workers := river.NewWorkers()
		river.AddWorker(workers, &payments.ExpiryWorker{Expiry: &payments.Expiry{Orders: orders, Hold: hold, Journal: journal}})
		jobs, err := payments.NewJobs(payments.JobsConfig{DB: db, Workers: workers,
			Periodic: []*river.PeriodicJob{payments.ExpiryPeriodicJob(hold)}})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		if err := jobs.Start(runCtx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			jobs.Stop(stopCtx)
		}()

		deadline := time.Now().Add(40 * time.Second)
		for {
			got, err := orders.Get(ctx, "acme", o.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status == models.OrderExpired {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("order still %q 40s after a hold of %s", got.Status, hold)
			}
			time.Sleep(200 * time.Millisecond)
		}
		p, err := models.NewProductStore(db).BySKU(ctx, "acme", "brass-compass")
		if err != nil {
			t.Fatal(err)
		}
		if p.Stock != 5 {
			t.Errorf("compass stock: got %d, want 5 (all back)", p.Stock)
		}
		evs, err := journal.ForOrder(ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(evs); n == 0 || evs[n-1].Kind != models.JournalExpiry || !strings.Contains(evs[n-1].Detail, "5 units back in stock") {
			t.Errorf("journal: got %+v, want it to end with the expiry", evs)
		}
	})
}

func TestExpiryInterval(t *testing.T) {
	for hold, want := range map[time.Duration]time.Duration{
		payments.DefaultOrderHold: time.Minute, 5 * time.Minute: 30 * time.Second, 2 * time.Second: time.Second,
	} {
		if got := payments.ExpiryInterval(hold); got != want {
			t.Errorf("ExpiryInterval(%s): got %s, want %s", hold, got, want)
		}
	}
}
