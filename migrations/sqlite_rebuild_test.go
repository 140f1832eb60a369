package migrations

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "github.com/glebarez/sqlite" // registers the "sqlite" database/sql driver the shop runs on
)

// TestSQLiteOrdersRebuildKeepsData: migration 00007 rebuilds the orders table on SQLite (to
// widen its status CHECK to 'expired'). The orders, their lines and payments must come through
// untouched — dropping orders with foreign keys on would have deleted every order line — and
// foreign keys must be on again afterwards, on the way down as well as up.
func TestSQLiteOrdersRebuildKeepsData(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "shop.db")+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // as models.Open does: the pragmas and the rebuild share one connection
	p, err := provider(db, "sqlite", Shop)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 6); err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, `INSERT INTO tenants (id, name, api_key_hash) VALUES ('acme', 'Acme', 'h')`)
	mustExec(t, db, `INSERT INTO products (id, tenant_id, sku, name, amount, currency, stock) VALUES (1, 'acme', 'mug', 'Mug', 1400, 'USD', 9)`)
	mustExec(t, db, `INSERT INTO orders (id, tenant_id, email, shipping_name, shipping_address, shipping_city,
		shipping_postal_code, shipping_country, subtotal_amount, amount, currency, status)
		VALUES ('ord_1', 'acme', 'a@example.com', 'Ada', '1 Way', 'London', 'N1', 'GB', 1400, 1400, 'USD', 'payment_failed')`)
	mustExec(t, db, `INSERT INTO order_lines (order_id, line_no, product_id, sku, name, unit_amount, quantity, amount)
		VALUES ('ord_1', 1, 1, 'mug', 'Mug', 1400, 1, 1400)`)
	mustExec(t, db, `INSERT INTO payments (id, tenant_id, order_id, status, amount, currency, payment_method_id, card_last4, gateway_key)
		VALUES ('pay_1', 'acme', 'ord_1', 'failed', 1400, 'USD', 'pm_1', '0002', 'pay_1:charge')`)

	if _, err := p.UpTo(ctx, 7); err != nil {
		t.Fatal(err)
	}
	mustKept(t, db)
	mustExec(t, db, `UPDATE orders SET status = 'expired' WHERE id = 'ord_1'`)
	mustExec(t, db, `UPDATE orders SET status = 'payment_failed' WHERE id = 'ord_1'`)

	if _, err := p.DownTo(ctx, 6); err != nil {
		t.Fatal(err)
	}
	mustKept(t, db)
	if _, err := db.Exec(`UPDATE orders SET status = 'expired' WHERE id = 'ord_1'`); err == nil {
		t.Error("after the down migration, status 'expired' was accepted; want the old CHECK back")
	}
}

func mustExec(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// mustKept checks the seeded order, line and payment are there, foreign keys are on and hold.
func mustKept(t *testing.T, db *sql.DB) {
	t.Helper()
	var orders, lines, payments, fk int
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM order_lines),
		(SELECT count(*) FROM payments)`).Scan(&orders, &lines, &payments); err != nil {
		t.Fatal(err)
	}
	if orders != 1 || lines != 1 || payments != 1 {
		t.Errorf("got %d orders, %d lines, %d payments; want 1 of each", orders, lines, payments)
	}
	if err := db.QueryRow(`PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
		t.Errorf("PRAGMA foreign_keys: got %d (%v), want 1", fk, err)
	}
	rows, err := db.Query(`PRAGMA foreign_key_check`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if rows.Next() {
		t.Error("PRAGMA foreign_key_check reports a broken reference")
	}
	if _, err := db.Exec(`INSERT INTO order_lines (order_id, line_no, product_id, sku, name, unit_amount, quantity, amount)
		VALUES ('ord_nothere', 1, 1, 'mug', 'Mug', 1400, 1, 1400)`); err == nil {
		t.Error("a line of an order that does not exist was accepted: the foreign key to orders is gone")
	}
}
