package models_test

import (
	"context"
	"testing"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// TestResetDemo: after a demo has sold stock, changed a price and lost a product, ResetDemo
// puts every demo product back as seeded, on both databases, and leaves the orders alone.
func TestResetDemo(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		modelstest.MustSeed(t, db)
		demo := models.DemoTenants(models.DefaultAPIKeys)
		orders := models.NewOrderStore(db)

		// What a demo does to the catalogue: an order takes stock (the scarce compass down to 3),
		// and, as an operator might by hand, a price changes and a product disappears.
		if _, err := orders.Create(ctx, validOrder(models.Item{SKU: "brass-compass", Quantity: 2}, models.Item{SKU: "camp-mug", Quantity: 3})); err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, "UPDATE products SET amount = 1, name = 'Renamed' WHERE tenant_id = 'globex' AND sku = 'burr-grinder'")
		mustExec(t, db, "DELETE FROM products WHERE tenant_id = 'globex' AND sku = 'paper-filters'")
		if got := stockOf(t, db, "acme", "brass-compass"); got != 3 {
			t.Fatalf("stock of brass-compass before the reset: got %d, want 3", got)
		}

		n, err := models.ResetDemo(ctx, db, demo)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, dt := range demo {
			want += len(dt.Products)
		}
		if n != want {
			t.Errorf("restored: got %d products, want %d", n, want)
		}
		mustCatalogueAsSeeded(t, db, demo)
		var kept int64
		if err := db.Model(&models.Order{}).Count(&kept).Error; err != nil {
			t.Fatal(err)
		}
		if kept != 1 {
			t.Errorf("orders after the reset: got %d, want the 1 placed before (history is kept)", kept)
		}

		// A second reset changes nothing and fails on nothing.
		if _, err := models.ResetDemo(ctx, db, demo); err != nil {
			t.Fatalf("second reset: %v", err)
		}
		mustCatalogueAsSeeded(t, db, demo)
	})
}

// TestResetDemoEmptyDatabase: on a database without demo data ResetDemo seeds the tenants and
// their catalogues, so the shop can start again from it.
func TestResetDemoEmptyDatabase(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		demo := models.DemoTenants(models.DefaultAPIKeys)
		if _, err := models.ResetDemo(context.Background(), db, demo); err != nil {
			t.Fatal(err)
		}
		mustCatalogueAsSeeded(t, db, demo)
		if _, err := models.NewTenantStore(db).ByAPIKey(context.Background(), "sk_test_globex"); err != nil {
			t.Errorf("globex's API key after a reset of an empty database: %v", err)
		}
	})
}

func mustCatalogueAsSeeded(tb testing.TB, db *gorm.DB, demo []models.DemoTenant) {
	tb.Helper()
	for _, dt := range demo {
		products, err := models.NewProductStore(db).List(context.Background(), dt.ID)
		if err != nil {
			tb.Fatal(err)
		}
		got := map[string]models.Product{}
		for _, p := range products {
			got[p.SKU] = p
		}
		for _, want := range dt.Products {
			p, ok := got[want.SKU]
			switch {
			case !ok:
				tb.Errorf("%s/%s: missing after the reset", dt.ID, want.SKU)
			case p.Name != want.Name || p.Description != want.Description || p.Image != want.Image ||
				p.Amount != want.Amount || p.Currency != want.Currency || p.Stock != want.Stock:
				tb.Errorf("%s/%s: got %q %d %s stock %d, want %q %d %s stock %d", dt.ID, want.SKU,
					p.Name, p.Amount, p.Currency, p.Stock, want.Name, want.Amount, want.Currency, want.Stock)
			}
		}
	}
}

func stockOf(tb testing.TB, db *gorm.DB, tenant, sku string) int {
	tb.Helper()
	p, err := models.NewProductStore(db).BySKU(context.Background(), tenant, sku)
	if err != nil {
		tb.Fatal(err)
	}
	return p.Stock
}

func mustExec(tb testing.TB, db *gorm.DB, sql string) {
	tb.Helper()
	if err := db.Exec(sql).Error; err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}
