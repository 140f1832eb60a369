package fakegateway

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	gatewaymigrations "checkoutlab/migrations/gateway"
)

// DBFileName is the SQLite file the gateway keeps under DATA_DIR when no DATABASE_URL is given.
const DBFileName = "gateway.db"

// The gateway's migrations keep their own version table and their own PostgreSQL advisory
// lock, so the gateway can share a database with another application (the shop does so in
// docker compose) and several gateway processes starting at once migrate exactly once.
const (
	migrationTable  = "gateway_schema_migrations"
	migrationLockID = 4242_0002
)

// OpenDB opens the gateway's database and applies its migrations: PostgreSQL when databaseURL
// is set (postgres:// or postgresql://), otherwise the SQLite file DBFileName under dataDir,
// created if needed. It returns an error if the database cannot be reached or migrated. Close
// it with CloseDB.
func OpenDB(ctx context.Context, databaseURL, dataDir string) (*gorm.DB, error) {
	db, err := openDB(ctx, databaseURL, filepath.Join(dataDir, DBFileName))
	if err != nil {
		return nil, fmt.Errorf("open gateway database: %w", err)
	}
	if err := Migrate(ctx, db); err != nil {
		_ = CloseDB(db)
		return nil, err
	}
	return db, nil
}

// CloseDB closes a database opened by OpenDB. Close the Gateway first: its sender and
// handlers use the database until they return.
func CloseDB(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return fmt.Errorf("close gateway database: %w", err)
	}
	if err := sqlDB.Close(); err != nil {
		return fmt.Errorf("close gateway database: %w", err)
	}
	return nil
}

func openDB(ctx context.Context, databaseURL, sqlitePath string) (*gorm.DB, error) {
	cfg := &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true, // the gateway opens transactions where it means them
		NowFunc:                func() time.Time { return time.Now().UTC() },
	}
	if databaseURL == "" {
		return openSQLite(ctx, sqlitePath, cfg)
	}
	if !strings.HasPrefix(databaseURL, "postgres://") && !strings.HasPrefix(databaseURL, "postgresql://") {
		// The URL is not repeated: it may carry a password.
		return nil, errors.New("the database URL must start with postgres:// or postgresql://")
	}
	db, err := gorm.Open(postgres.Open(databaseURL), cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(20)
	sqlDB.SetMaxIdleConns(20)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	return db, nil
}

// openSQLite opens the file in WAL mode, with foreign keys on and write transactions that
// take the lock when they begin (_txlock=immediate).
//
// The pool holds one connection: SQLite has one writer at a time, and with several
// connections two transactions that read and then write fail with SQLITE_BUSY instead of
// waiting. One connection turns that into a queue in database/sql.
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
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return db, nil
}

// Migrate applies the gateway's migrations (migrations/gateway, embedded) to db, a database
// opened by OpenDB or any GORM PostgreSQL or SQLite database.
func Migrate(ctx context.Context, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return fmt.Errorf("migrate gateway: %w", err)
	}
	dialect := db.Dialector.Name() // "postgres" or "sqlite"
	opts := []goose.ProviderOption{goose.WithTableName(migrationTable)}
	gooseDialect := goose.DialectSQLite3
	switch dialect {
	case "postgres":
		gooseDialect = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID))
		if err != nil {
			return fmt.Errorf("migrate gateway: lock: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	case "sqlite":
	default:
		return fmt.Errorf("migrate gateway: unsupported database %q", dialect)
	}
	files, err := fs.Sub(gatewaymigrations.FS, dialect)
	if err != nil {
		return fmt.Errorf("migrate gateway: %w", err)
	}
	p, err := goose.NewProvider(gooseDialect, sqlDB, files, opts...)
	if err != nil {
		return fmt.Errorf("migrate gateway: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate gateway: %w", err)
	}
	return nil
}
