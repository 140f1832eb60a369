// Package modelstest gives tests a fresh, migrated database of each dialect.
//
// SQLite always runs (a file in the test's temporary directory). PostgreSQL runs when it is
// reachable at TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres): each
// test gets a database of its own, created from scratch and dropped afterwards. Locally a test
// without PostgreSQL skips with a clear message; with CI set it fails instead, so CI can never
// go green by skipping the database that production uses.
package modelstest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver for the admin connection
	"gorm.io/gorm"

	"checkoutlab/models"
)

// Dialects lists the dialects every store test runs on.
var Dialects = []string{models.SQLite, models.Postgres}

// DefaultAdminURL is where tests look for PostgreSQL when TEST_DATABASE_URL is unset.
const DefaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// InCI reports whether the CI variable is set: then nothing that needs PostgreSQL or Chromium
// may skip.
func InCI() bool { v := os.Getenv("CI"); return v != "" && v != "false" && v != "0" }

// SkipOrFail skips the test with reason locally, and fails it under CI.
func SkipOrFail(tb testing.TB, reason string) {
	tb.Helper()
	if InCI() {
		tb.Fatalf("%s (CI is set, so this may not skip)", reason)
	}
	tb.Skip(reason)
}

// ForEachDialect runs fn as a subtest per dialect with a fresh, migrated, empty database.
func ForEachDialect(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	for _, d := range Dialects {
		t.Run(d, func(t *testing.T) { fn(t, MustOpen(t, d)) })
	}
}

// MustOpen returns a fresh, migrated, empty database of dialect for tb; it is removed at cleanup.
func MustOpen(tb testing.TB, dialect string) *gorm.DB {
	tb.Helper()
	ctx := context.Background()
	url := MustDatabaseURL(tb, dialect)
	dir := ""
	if url == "" {
		dir = tb.TempDir()
	}
	db, err := models.Open(ctx, url, dir, "shop.db")
	if err != nil {
		tb.Fatalf("open %s: %v", dialect, err)
	}
	tb.Cleanup(func() { models.Close(db) })
	if err := models.Migrate(ctx, db); err != nil {
		tb.Fatalf("migrate %s: %v", dialect, err)
	}
	return db
}

// MustSeed inserts the demo tenants and catalogues.
func MustSeed(tb testing.TB, db *gorm.DB) {
	tb.Helper()
	if _, err := models.SeedIfEmpty(context.Background(), db, models.DemoTenants(models.DefaultAPIKeys)); err != nil {
		tb.Fatalf("seed: %v", err)
	}
}

// MustDatabaseURL returns "" for SQLite (use a file), or the URL of a new, empty PostgreSQL
// database that is dropped when tb ends. It skips (or fails under CI) without PostgreSQL.
func MustDatabaseURL(tb testing.TB, dialect string) string {
	tb.Helper()
	if dialect == models.SQLite {
		return ""
	}
	admin := adminDB(tb)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "checkoutlab_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("create test database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Logf("drop test database %s: %v", name, err)
		}
	})
	u, _ := url.Parse(adminURL())
	u.Path = "/" + name
	return u.String()
}

var (
	adminOnce sync.Once
	admin     *sql.DB
	adminErr  error
)

func adminURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultAdminURL
}

func adminDB(tb testing.TB) *sql.DB {
	tb.Helper()
	adminOnce.Do(func() {
		admin, adminErr = sql.Open("pgx", adminURL())
		if adminErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		adminErr = admin.PingContext(ctx)
	})
	if adminErr != nil {
		SkipOrFail(tb, "PostgreSQL is not reachable at TEST_DATABASE_URL ("+adminErr.Error()+")")
	}
	return admin
}

// MustOrderAt places an order of tenant for one unit of sku and sets its creation time to at,
// so tests can lay orders out on a timeline.
func MustOrderAt(tb testing.TB, db *gorm.DB, tenant, sku string, at time.Time) *models.Order {
	tb.Helper()
	o, err := models.NewOrderStore(db).Create(context.Background(), models.NewOrder{
		TenantID: tenant, Email: "ada@example.com", Items: []models.Item{{SKU: sku, Quantity: 1}},
		Shipping: models.Address{Name: "Ada Lovelace", Address: "1 Analytical Way", City: "London", PostalCode: "N1 9GU", Country: "GB"},
	})
	if err != nil {
		tb.Fatalf("place order: %v", err)
	}
	if err := db.Model(&models.Order{}).Where("id = ?", o.ID).Update("created_at", at.UTC()).Error; err != nil {
		tb.Fatalf("set order time: %v", err)
	}
	o.CreatedAt = at.UTC()
	return o
}

// MustSettledPayment records a payment of o and settles it with status (failed, succeeded or
// refunded), moving the order along as the payment operation would. A succeeded payment gets a
// made-up gateway charge id.
func MustSettledPayment(tb testing.TB, db *gorm.DB, o *models.Order, status, declineCode string) *models.Payment {
	tb.Helper()
	var p *models.Payment
	err := db.Transaction(func(tx *gorm.DB) error {
		cur, err := models.GetOrderTx(tx, o.ID)
		if err != nil {
			return err
		}
		if p, err = models.CreatePaymentTx(tx, models.NewPayment{TenantID: o.TenantID, Order: cur,
			PaymentMethodID: "pm_test", CardLast4: "4242", CardBrand: "visa"}); err != nil {
			return err
		}
		charge := ""
		if status != models.PaymentFailed {
			charge = models.NewID("ch")
		}
		_, err = models.SettlePaymentTx(tx, p.ID, status, charge, declineCode)
		return err
	})
	if err != nil {
		tb.Fatalf("pay order %s: %v", o.ID, err)
	}
	return p
}
