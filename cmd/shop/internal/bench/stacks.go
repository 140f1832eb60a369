package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"maps"
	"net/url"
	"os"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver for the admin connection

	"checkoutlab/cmd/shop/internal/stack"
	"checkoutlab/fakegateway"
	"checkoutlab/payments"
	"gorm.io/gorm"
)

// benchEnv is the environment of a benchmark stack: free ports, a quiet log, and otherwise
// the defaults `shop serve` runs with (leases, timeouts, pool sizes), so that the figures are
// the served shop's.
var benchEnv = map[string]string{
	"SHOP_ADDR":    "127.0.0.1:0",
	"GATEWAY_ADDR": "127.0.0.1:0",
	"LOG_LEVEL":    "error",
}

// plentifulStock is set on every product of a benchmark stack: the benchmark is about
// payments and keys, not about running out of stock.
const plentifulStock = 100_000_000

// benchStack is one fresh stack with its own database, and what the benchmark needs of it.
type benchStack struct {
	name   string // "protected", "unprotected", "sustained"
	st     *stack.Stack
	client *shopClient
	gwDB   *gorm.DB // the gateway's database (its gw_ tables), for its pending deliveries
	dbName string   // the PostgreSQL database, "" on SQLite
	close  func()
}

// startStack starts a fresh stack with protections p: a new SQLite file in a temporary
// directory, or a new PostgreSQL database made from r.DatabaseURL and dropped at close.
func (r *Runner) startStack(ctx context.Context, name string, p payments.Protections, clients int) (*benchStack, error) {
	dir, err := os.MkdirTemp("", "checkoutlab-bench-")
	if err != nil {
		return nil, err
	}
	cleanups := []func(){func() { os.RemoveAll(dir) }}
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	env := map[string]string{"DATA_DIR": dir}
	maps.Copy(env, benchEnv)
	b := &benchStack{name: name}
	if r.DatabaseURL != "" {
		dbURL, dbName, drop, err := r.freshDatabase(ctx)
		if err != nil {
			cleanup()
			return nil, err
		}
		cleanups = append(cleanups, drop)
		env["DATABASE_URL"], b.dbName = dbURL, dbName
	}
	cfg, err := r.Config(func(k string) string { return env[k] })
	if err != nil {
		cleanup()
		return nil, err
	}
	cfg.Protections = p
	st, err := stack.Start(ctx, cfg, r.Wire)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("start the %s stack: %w", name, err)
	}
	cleanups = append(cleanups, func() { st.Close() })
	b.st = st
	if err := st.DB().WithContext(ctx).Exec("UPDATE products SET stock = ?", plentifulStock).Error; err != nil {
		cleanup()
		return nil, fmt.Errorf("restock the %s stack: %w", name, err)
	}
	// On PostgreSQL the gateway's tables are in the shop's database; on SQLite the gateway
	// has its own file in DATA_DIR, which a second connection reads alongside (WAL).
	b.gwDB = st.DB()
	if r.DatabaseURL == "" {
		if b.gwDB, err = fakegateway.OpenDB(ctx, "", dir); err != nil {
			cleanup()
			return nil, err
		}
		gw := b.gwDB
		cleanups = append(cleanups, func() { _ = fakegateway.CloseDB(gw) })
	}
	b.client = newShopClient(st.URL(), cfg.APIKeys, clients)
	cleanups = append(cleanups, b.client.close)
	b.close = cleanup
	return b, nil
}

// freshDatabase creates an empty PostgreSQL database on r.DatabaseURL's server and returns
// its URL, its name and a function that drops it.
func (r *Runner) freshDatabase(ctx context.Context) (string, string, func(), error) {
	admin, err := r.admin(ctx)
	if err != nil {
		return "", "", nil, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "checkoutlab_bench_" + hex.EncodeToString(b[:])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", "", nil, fmt.Errorf("create the benchmark's database: %w", err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(r.stderr(), "shop bench: drop database %s: %v\n", name, err)
		}
	}
	u, err := url.Parse(r.DatabaseURL)
	if err != nil {
		drop()
		return "", "", nil, err
	}
	u.Path = "/" + name
	return u.String(), name, drop, nil
}

// admin is a connection to r.DatabaseURL's own database, which creates and drops the
// benchmark's databases and reads pg_stat_database (so that its reads are not counted in
// the benchmark databases' commits).
func (r *Runner) admin(ctx context.Context) (*sql.DB, error) {
	r.adminMu.Lock()
	defer r.adminMu.Unlock()
	if r.adminDB != nil {
		return r.adminDB, nil
	}
	db, err := sql.Open("pgx", r.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("PostgreSQL at --database-url: %w", err)
	}
	db.SetMaxOpenConns(4)
	r.adminDB = db
	return db, nil
}

// closeAdmin closes the admin connection, if one was opened.
func (r *Runner) closeAdmin() {
	r.adminMu.Lock()
	defer r.adminMu.Unlock()
	if r.adminDB != nil {
		r.adminDB.Close()
		r.adminDB = nil
	}
}

// warmUp sends a few requests of every kind, so that the first measured round does not pay
// for cold caches, prepared statements and new connections.
func (b *benchStack) warmUp(ctx context.Context, clients int) {
	for _, path := range []string{checkoutPath, ordersPath} {
		runLoad(ctx, clients, 150*time.Millisecond, func(ctx context.Context) answer {
			return b.client.post(ctx, path, b.client.nextPurchase(path), newKey(), nil)
		}, created)
	}
}
