package payments_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
)

// strandedArgs is a job for TestJobsRescueStrandedJob only.
type strandedArgs struct{}

func (strandedArgs) Kind() string { return "test_stranded" }

type strandedWorker struct {
	river.WorkerDefaults[strandedArgs]
	ran chan int // the attempt that ran
}

func (w *strandedWorker) Work(ctx context.Context, job *river.Job[strandedArgs]) error {
	w.ran <- job.Attempt
	return nil
}

// TestJobsRescueStrandedJob: a job that a process had taken when it died stays "running" in
// the dead process's name. With RescueAfter short, River's rescuer runs it again soon (with
// River's default of over an hour, the receipt of an order paid just before a crash would be
// that late).
func TestJobsRescueStrandedJob(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		if err := payments.MigrateJobQueue(ctx, db); err != nil {
			t.Fatal(err)
		}
		worker := &strandedWorker{ran: make(chan int, 4)}
		workers := river.NewWorkers()
		river.AddWorker(workers, worker)
		jobs, err := payments.NewJobs(payments.JobsConfig{DB: db, Workers: workers, RescueAfter: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		// The job as a dead process leaves it: taken a minute ago, never finished.
		if err := db.Transaction(func(tx *gorm.DB) error { return jobs.InsertTx(tx, strandedArgs{}, nil) }); err != nil {
			t.Fatal(err)
		}
		aMinuteAgo := "now() - interval '1 minute'"
		if models.Dialect(db) == models.SQLite {
			aMinuteAgo = "strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 minutes')"
		}
		res := db.Exec("UPDATE river_job SET state = 'running', attempt = 1, attempted_at = "+aMinuteAgo+" WHERE kind = ?", strandedArgs{}.Kind())
		if res.Error != nil || res.RowsAffected != 1 {
			t.Fatalf("strand the job: %v (%d rows)", res.Error, res.RowsAffected)
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
		select {
		case attempt := <-worker.ran:
			if attempt != 2 {
				t.Errorf("the rescued job ran as attempt %d, want 2", attempt)
			}
		case <-time.After(40 * time.Second):
			t.Fatal("the stranded job did not run again within 40s")
		}
	})
}
