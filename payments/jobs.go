package payments

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"gorm.io/gorm"

	"checkoutlab/models"
)

// The job queue is River, on the same database as the shop. Side effects (a receipt, a
// shipment request) are inserted as jobs in the SAME transaction as the state change that
// causes them — the transactional outbox — so a paid order always gets its jobs and a rolled
// back one never does. The reaper runs as a periodic River job, which River schedules only on
// its elected leader, so several shop processes on one database do not all run it at once.
// (The completer does not: see Completer.Run for why.)

func jobDriver(db *gorm.DB) (riverdriver.Driver[*sql.Tx], error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	if models.Dialect(db) == models.Postgres {
		return riverdatabasesql.New(sqlDB), nil
	}
	return riversqlite.New(sqlDB), nil
}

// MigrateJobQueue creates or upgrades River's tables. It runs at start right after the shop's
// own migrations (and with `shop migrate`): River versions its schema itself, in its
// river_migration table, so its SQL is not copied into migrations/.
func MigrateJobQueue(ctx context.Context, db *gorm.DB) error {
	drv, err := jobDriver(db)
	if err != nil {
		return err
	}
	m, err := rivermigrate.New(drv, &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("job queue migrations: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("job queue migrations: %w", err)
	}
	return nil
}

// Jobs is the shop's job queue.
type Jobs struct {
	client *river.Client[*sql.Tx]
	// Protections: with webhook_dedupe off (the failure lab only) side effects are enqueued
	// without River's uniqueness.
	Protections Protections
}

// JobsConfig configures the queue: which workers exist and which periodic jobs are scheduled.
type JobsConfig struct {
	DB       *gorm.DB
	Workers  *river.Workers
	Periodic []*river.PeriodicJob
	Logger   *slog.Logger
	// PollInterval is how often workers look for new jobs (SQLite has no LISTEN/NOTIFY, and
	// database/sql does not give River one on PostgreSQL either). Default 200ms.
	PollInterval time.Duration
	// RescueAfter is how long a job may stay running before River's rescuer runs it again:
	// a job that a process had fetched when it died stays "running" until then. A job's own
	// timeout is half of it. Every job here is safe to run twice (the receiving side dedupes),
	// so this can be short. Default 1 minute; River's own default is over an hour.
	RescueAfter time.Duration
	// MaxWorkers is how many jobs run at once. Default (zero): JobWorkers(DB).
	MaxWorkers int
}

// JobWorkers sizes the job queue to the database pool, as NewJobs does by default.
//
// Every job here is a short transaction or two, so a worker mostly holds a database
// connection, and workers beyond the pool only wait for one. On PostgreSQL the queue gets half
// the pool (10 of models.PostgresPoolSize): enough to drain what 8 clients produce, while the
// other half stays free for the requests that produce it, so a backlog of jobs cannot starve
// checkouts. SQLite has one connection and one writer, so the jobs queue for it whatever the
// number of workers; 8 still pay, because River fetches as many jobs at once as it has free
// workers (one fetch per batch instead of per job) and a job's work off the database overlaps
// the next one's.
func JobWorkers(db *gorm.DB) int {
	if models.Dialect(db) == models.SQLite {
		return 8
	}
	return max(models.PoolSize(db)/2, 1)
}

// NewJobs builds the job queue client; Start runs its workers.
func NewJobs(cfg JobsConfig) (*Jobs, error) {
	drv, err := jobDriver(cfg.DB)
	if err != nil {
		return nil, err
	}
	poll := cfg.PollInterval
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	rescueAfter := cfg.RescueAfter
	if rescueAfter <= 0 {
		rescueAfter = time.Minute
	}
	workers := cfg.MaxWorkers
	if workers <= 0 {
		workers = JobWorkers(cfg.DB)
	}
	client, err := river.NewClient(drv, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           cfg.Workers,
		PeriodicJobs:      cfg.Periodic,
		FetchPollInterval: poll,
		// While jobs wait, River fetches again as soon as a worker is free, but not sooner
		// than FetchCooldown after the last fetch; each fetch takes up to one job per free
		// worker. So the queue runs at most workers/FetchCooldown jobs a second: 10 ms keeps
		// that well above what a busy shop produces (8 workers: 800 a second). An idle queue
		// still polls only every PollInterval.
		FetchCooldown:        min(10*time.Millisecond, poll),
		MaxAttempts:          25,
		JobTimeout:           rescueAfter / 2,
		RescueStuckJobsAfter: rescueAfter,
		Logger:               logger,
		Middleware:           []rivertype.Middleware{&jobTracing{}}, // a job continues its enqueuer's trace
	})
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	return &Jobs{client: client}, nil
}

// Start runs the workers and the periodic scheduler until ctx ends or Stop is called.
func (j *Jobs) Start(ctx context.Context) error { return j.client.Start(ctx) }

// Stop waits for running jobs to finish (until ctx ends).
func (j *Jobs) Stop(ctx context.Context) error { return j.client.Stop(ctx) }

// InsertTx enqueues a job inside the caller's GORM transaction. It must be InsertTx with the
// transaction's own *sql.Tx: a plain Insert would run on another connection — outside the
// transaction on PostgreSQL, and waiting forever for the only connection on SQLite.
func (j *Jobs) InsertTx(tx *gorm.DB, args river.JobArgs, opts *river.InsertOpts) error {
	sqlTx, ok := tx.Statement.ConnPool.(*sql.Tx)
	if !ok {
		return fmt.Errorf("enqueue %s: not inside a transaction", args.Kind())
	}
	if _, err := j.client.InsertTx(tx.Statement.Context, sqlTx, args, opts); err != nil {
		return fmt.Errorf("enqueue %s: %w", args.Kind(), err)
	}
	return nil
}
