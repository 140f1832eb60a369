// Package migrations holds the versioned SQL schema of the shop and of the fake gateway, one
// folder per dialect, embedded into the binary and applied at start (and by `shop migrate`).
//
// The schema lives in SQL rather than in GORM's AutoMigrate so that the constraints that keep
// money safe (UNIQUE, CHECK, foreign keys, partial indexes) are written down, reviewed and
// versioned like any other code.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed shop gateway
var files embed.FS

// Set names one schema: the shop's or the fake gateway's. Each keeps its own version table,
// so the two can share one PostgreSQL database (as they do in docker compose) without
// stepping on each other.
type Set string

const (
	Shop    Set = "shop"
	Gateway Set = "gateway"
)

// Apply brings the schema of set up to date on db. dialect is "postgres" or "sqlite".
// On PostgreSQL it takes a session-level advisory lock first, so several processes starting
// at once on one database apply each migration exactly once.
func Apply(ctx context.Context, db *sql.DB, dialect string, set Set) error {
	p, err := provider(db, dialect, set)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("apply %s migrations: %w", set, err)
	}
	return nil
}

// Version reports the newest applied migration of set.
func Version(ctx context.Context, db *sql.DB, dialect string, set Set) (int64, error) {
	p, err := provider(db, dialect, set)
	if err != nil {
		return 0, err
	}
	return p.GetDBVersion(ctx)
}

func provider(db *sql.DB, dialect string, set Set) (*goose.Provider, error) {
	var gooseDialect goose.Dialect
	opts := []goose.ProviderOption{goose.WithTableName(string(set) + "_schema_migrations")}
	switch dialect {
	case "postgres":
		gooseDialect = goose.DialectPostgres
		// The lock id differs per set so the shop and gateway can migrate concurrently.
		id := int64(4242_0001)
		if set == Gateway {
			id = 4242_0002
		}
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(id))
		if err != nil {
			return nil, fmt.Errorf("migration lock: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	case "sqlite":
		gooseDialect = goose.DialectSQLite3
	default:
		return nil, fmt.Errorf("migrations: unknown dialect %q", dialect)
	}
	sub, err := fs.Sub(files, string(set)+"/"+dialect)
	if err != nil {
		return nil, fmt.Errorf("migrations for %s/%s: %w", set, dialect, err)
	}
	p, err := goose.NewProvider(gooseDialect, db, sub, opts...)
	if err != nil {
		return nil, fmt.Errorf("migrations for %s/%s: %w", set, dialect, err)
	}
	return p, nil
}
