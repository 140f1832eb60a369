package payments_test

import (
	"context"
	"testing"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
)

// TestJobWorkersFollowThePool: the job queue takes half of a PostgreSQL pool of the size
// asked for, and a fixed few on SQLite, whose pool is one connection whatever is asked.
func TestJobWorkersFollowThePool(t *testing.T) {
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			url := modelstest.MustDatabaseURL(t, dialect)
			dir := ""
			if url == "" {
				dir = t.TempDir()
			}
			db, err := models.OpenPool(context.Background(), url, dir, "shop.db", 6)
			if err != nil {
				t.Fatal(err)
			}
			defer models.Close(db)
			pool, workers := models.PoolSize(db), payments.JobWorkers(db)
			wantPool, wantWorkers := 6, 3
			if dialect == models.SQLite {
				wantPool, wantWorkers = 1, 8
			}
			if pool != wantPool || workers != wantWorkers {
				t.Errorf("got a pool of %d and %d workers, want %d and %d", pool, workers, wantPool, wantWorkers)
			}
		})
	}
}
