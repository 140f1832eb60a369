package payments_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"gorm.io/gorm"

	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
)

// drainArgs is a job for BenchmarkJobsDrain only: it commits one row, about the smallest
// thing a side effect does.
type drainArgs struct{ N int }

func (drainArgs) Kind() string { return "test_drain" }

type drainWorker struct {
	river.WorkerDefaults[drainArgs]
	db *gorm.DB
}

func (w *drainWorker) Work(ctx context.Context, job *river.Job[drainArgs]) error {
	return w.db.WithContext(ctx).Exec("INSERT INTO test_drained (n) VALUES (?)", job.Args.N).Error
}

// BenchmarkJobsDrain measures how many jobs a second the queue runs from a backlog, with 4
// workers (the old setting) and with JobWorkers(db):
//
//	CI=true go test ./payments -run '^$' -bench JobsDrain -benchtime 2x
func BenchmarkJobsDrain(b *testing.B) {
	const backlog = 1000
	for _, dialect := range modelstest.Dialects {
		for _, workers := range []int{4, 0} {
			b.Run(fmt.Sprintf("%s/workers=%d", dialect, workers), func(b *testing.B) {
				var total time.Duration
				for range b.N {
					b.StopTimer()
					db := modelstest.MustOpen(b, dialect)
					ctx := context.Background()
					if err := payments.MigrateJobQueue(ctx, db); err != nil {
						b.Fatal(err)
					}
					if err := db.Exec("CREATE TABLE test_drained (n integer NOT NULL)").Error; err != nil {
						b.Fatal(err)
					}
					ws := river.NewWorkers()
					river.AddWorker(ws, &drainWorker{db: db})
					jobs, err := payments.NewJobs(payments.JobsConfig{DB: db, Workers: ws, MaxWorkers: workers, Logger: slog.New(slog.DiscardHandler)})
					if err != nil {
						b.Fatal(err)
					}
					if err := db.Transaction(func(tx *gorm.DB) error {
						for n := range backlog {
							if err := jobs.InsertTx(tx, drainArgs{N: n}, nil); err != nil {
								return err
							}
						}
						return nil
					}); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					start := time.Now()
					runCtx, cancel := context.WithCancel(ctx)
					if err := jobs.Start(runCtx); err != nil {
						b.Fatal(err)
					}
					for done := int64(0); done < backlog; time.Sleep(5 * time.Millisecond) {
						if err := db.Table("test_drained").Count(&done).Error; err != nil {
							b.Fatal(err)
						}
						if time.Since(start) > time.Minute {
							b.Fatalf("drained %d of %d jobs in a minute", done, backlog)
						}
					}
					total += time.Since(start)
					b.StopTimer()
					stopCtx, stop := context.WithTimeout(ctx, 10*time.Second)
					_ = jobs.Stop(stopCtx)
					stop()
					cancel()
				}
				b.ReportMetric(float64(backlog*b.N)/total.Seconds(), "jobs/s")
			})
		}
	}
}
