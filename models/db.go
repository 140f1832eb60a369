// Package models holds the shop's GORM models and the stores that read and write them.
//
// Every store method takes a context first and runs with db.WithContext(ctx). ORM errors are
// translated here, at the boundary, into the small vocabulary of errors.go, so that handlers and
// payments never see a gorm or driver error type.
package models

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"checkoutlab/migrations"
)

// Dialect names for the two supported databases, as reported by Dialect(db).
const (
	Postgres = "postgres"
	SQLite   = "sqlite"
)

// MinSQLiteVersion is the oldest embedded SQLite we accept: the job queue needs jsonb().
const MinSQLiteVersion = "3.45.0"

// PostgresPoolSize is the default size of the shop's PostgreSQL pool (DB_POOL_SIZE). On two
// cores PostgreSQL does its best work with a few busy connections; 20 leave room for the
// requests in flight (8 clients, each holding one while its transaction runs) and for the job
// queue's workers (payments.JobWorkers, half the pool) without letting either starve the
// other, and many stacks fit in PostgreSQL's default 100 connections. SQLite's pool is always
// one connection: see openSQLite.
const PostgresPoolSize = 20

// Open connects to PostgreSQL when databaseURL starts with postgres:// (or postgresql://), and
// otherwise opens (creating it if needed) the embedded SQLite file name under dataDir. The
// PostgreSQL pool has PostgresPoolSize connections.
func Open(ctx context.Context, databaseURL, dataDir, name string) (*gorm.DB, error) {
	return OpenPool(ctx, databaseURL, dataDir, name, PostgresPoolSize)
}

// PoolSize is how many connections db's pool opens at most: 1 on SQLite.
func PoolSize(db *gorm.DB) int {
	sqlDB, err := db.DB()
	if err != nil {
		return 1
	}
	return max(sqlDB.Stats().MaxOpenConnections, 1)
}

// OpenPool is Open with a PostgreSQL pool of poolSize connections (PostgresPoolSize if
// poolSize is zero or less). SQLite ignores it: it keeps its one connection.
func OpenPool(ctx context.Context, databaseURL, dataDir, name string, poolSize int) (*gorm.DB, error) {
	if poolSize <= 0 {
		poolSize = PostgresPoolSize
	}
	cfg := &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true, // our stores open transactions where they mean them
		NowFunc:                func() time.Time { return time.Now().UTC() },
	}
	if databaseURL != "" {
		if !strings.HasPrefix(databaseURL, "postgres://") && !strings.HasPrefix(databaseURL, "postgresql://") {
			return nil, fmt.Errorf("DATABASE_URL must start with postgres://, got %q", redactURL(databaseURL))
		}
		db, err := gorm.Open(postgres.Open(databaseURL), cfg)
		if err != nil {
			return nil, fmt.Errorf("open postgres: %w", err)
		}
		sqlDB, err := db.DB()
		if err != nil {
			return nil, err
		}
		sqlDB.SetMaxOpenConns(poolSize)
		sqlDB.SetMaxIdleConns(poolSize) // kept open: a connection costs PostgreSQL a process to start
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
		if err := sqlDB.PingContext(ctx); err != nil {
			return nil, fmt.Errorf("connect to postgres: %w", err)
		}
		return db, nil
	}
	return openSQLite(ctx, filepath.Join(dataDir, name), cfg)
}

// openSQLite opens an SQLite file in WAL mode with a busy timeout and foreign keys on.
//
// The pool holds ONE connection. SQLite allows one writer at a time anyway; with several
// connections, two transactions that both read and then write fail with SQLITE_BUSY instead of
// waiting. One connection turns that into an orderly queue in database/sql, which is what a
// checkout wants. It also means a transaction must never call back into the pool (it would wait
// for itself), which keeps us honest about "one operation, one transaction".
func openSQLite(ctx context.Context, path string, cfg *gorm.Config) (*gorm.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)" +
		"&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := gorm.Open(sqlite.Open(dsn), cfg)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(1)
	sqlDB.SetMaxIdleConns(1)
	sqlDB.SetConnMaxLifetime(0)
	var version string
	if err := db.WithContext(ctx).Raw("SELECT sqlite_version()").Scan(&version).Error; err != nil {
		return nil, fmt.Errorf("sqlite version: %w", err)
	}
	if compareVersions(version, MinSQLiteVersion) < 0 {
		return nil, fmt.Errorf("embedded SQLite is %s, need at least %s", version, MinSQLiteVersion)
	}
	return db, nil
}

// Dialect reports Postgres or SQLite for a database opened by Open.
func Dialect(db *gorm.DB) string {
	if db.Dialector.Name() == "postgres" {
		return Postgres
	}
	return SQLite
}

// Migrate applies the shop's migrations.
func Migrate(ctx context.Context, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return migrations.Apply(ctx, sqlDB, Dialect(db), migrations.Shop)
}

// Ping checks that the database answers; /healthz uses it.
func Ping(ctx context.Context, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

// Close closes the pool, logging rather than returning the error: it runs at shutdown.
func Close(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		if err := sqlDB.Close(); err != nil {
			slog.Warn("close database", "err", err)
		}
	}
}

func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < 3; i++ {
		var x, y int
		if i < len(pa) {
			fmt.Sscanf(pa[i], "%d", &x)
		}
		if i < len(pb) {
			fmt.Sscanf(pb[i], "%d", &y)
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// redactURL hides a password in a connection string before it reaches an error message.
func redactURL(s string) string {
	if at := strings.Index(s, "@"); at > 0 {
		if scheme := strings.Index(s, "://"); scheme >= 0 && scheme < at {
			return s[:scheme+3] + "…@" + s[at+1:]
		}
	}
	return s
}

// isUniqueViolation reports whether err is a duplicate-key error on either dialect.
func isUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "SQLSTATE 23505") || strings.Contains(msg, "UNIQUE constraint failed")
}
