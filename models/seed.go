package models

import (
	"context"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// DemoTenant describes one demo merchant and its catalogue.
type DemoTenant struct {
	ID, Name, APIKey string
	Products         []Product
}

// DefaultAPIKeys are the demo credentials documented in the README. They are test keys for a
// local demo, not secrets; SHOP_API_KEYS overrides them.
var DefaultAPIKeys = map[string]string{"acme": "sk_test_acme", "globex": "sk_test_globex"}

// DemoTenants returns the demo merchants: acme sells outdoor gear in US dollars, globex sells
// coffee equipment in euros. Each has one scarce product so "out of stock" can be shown.
func DemoTenants(apiKeys map[string]string) []DemoTenant {
	p := func(sku, name, desc string, amount int64, currency string, stock int) Product {
		return Product{SKU: sku, Name: name, Description: desc, Image: "/static/img/products/" + sku + ".svg",
			Amount: amount, Currency: currency, Stock: stock}
	}
	return []DemoTenant{
		{ID: "acme", Name: "Acme Outfitters", APIKey: apiKeys["acme"], Products: []Product{
			p("trail-pack-30", "Trail Pack 30L", "A light, weatherproof daypack with a padded hip belt and room for a hydration bladder.", 8900, "USD", 1000),
			p("steel-bottle", "Insulated Steel Bottle", "Keeps drinks cold for 24 hours or hot for 12. 750 ml, leak-proof lid.", 2900, "USD", 1000),
			p("merino-beanie", "Merino Beanie", "Soft, itch-free merino wool that keeps you warm even when damp.", 2400, "USD", 1000),
			p("camp-mug", "Enamel Camp Mug", "A classic speckled enamel mug that survives campfires and backpacks.", 1400, "USD", 1000),
			p("headlamp", "Rechargeable Headlamp", "400 lumens, red night mode and a USB-C battery that lasts all weekend.", 3900, "USD", 1000),
			p("rain-shell", "Rain Shell Jacket", "Three-layer waterproof, breathable shell that packs into its own pocket.", 14900, "USD", 1000),
			p("hiking-socks", "Hiking Socks (3 pairs)", "Cushioned wool blend socks with a seamless toe.", 1900, "USD", 1000),
			p("brass-compass", "Founders' Brass Compass", "A numbered, hand-finished brass compass. Only a few are made each year.", 12000, "USD", 5),
		}},
		{ID: "globex", Name: "Globex Coffee Co.", APIKey: apiKeys["globex"], Products: []Product{
			p("espresso-beans", "Espresso Beans 1 kg", "A chocolatey house blend, roasted weekly for espresso.", 2490, "EUR", 1000),
			p("gooseneck-kettle", "Gooseneck Kettle", "A precise pour with a built-in thermometer, 1 litre.", 4900, "EUR", 1000),
			p("ceramic-dripper", "Ceramic Dripper", "A hand-glazed pour-over dripper that holds heat evenly.", 2200, "EUR", 1000),
			p("burr-grinder", "Burr Grinder", "Conical steel burrs with 40 grind settings, from espresso to cold brew.", 12900, "EUR", 1000),
			p("paper-filters", "Paper Filters (100)", "Unbleached filters sized for the ceramic dripper.", 650, "EUR", 1000),
			p("barista-apron", "Barista Apron", "Heavy canvas apron with leather straps and three pockets.", 3500, "EUR", 1000),
			p("cupping-set", "Cupping Set", "Six porcelain bowls and two spoons for tasting like a roaster. Limited run.", 8800, "EUR", 5),
		}},
	}
}

// SeedIfEmpty inserts the demo tenants and catalogues when the database has no tenant yet, in
// one transaction. It reports whether it seeded. A database that already has tenants is left
// exactly as it is.
func SeedIfEmpty(ctx context.Context, db *gorm.DB, tenants []DemoTenant) (bool, error) {
	seeded := false
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&Tenant{}).Count(&n).Error; err != nil {
			return fmt.Errorf("count tenants: %w", err)
		}
		if n > 0 {
			return nil
		}
		for _, dt := range tenants {
			if dt.APIKey == "" {
				return fmt.Errorf("seed: tenant %s has no API key", dt.ID)
			}
			t := Tenant{ID: dt.ID, Name: dt.Name, APIKeyHash: HashAPIKey(dt.APIKey)}
			if err := tx.Create(&t).Error; err != nil {
				return fmt.Errorf("seed tenant %s: %w", dt.ID, err)
			}
			products := dt.catalogue()
			if err := tx.Create(&products).Error; err != nil {
				return fmt.Errorf("seed products of %s: %w", dt.ID, err)
			}
		}
		seeded = true
		return nil
	})
	return seeded, err
}

// catalogue returns the tenant's demo products, each marked with the tenant.
func (dt DemoTenant) catalogue() []Product {
	products := make([]Product, len(dt.Products))
	for i, p := range dt.Products {
		p.TenantID = dt.ID
		products[i] = p
	}
	return products
}

// ResetDemo puts the demo catalogue back as SeedIfEmpty wrote it, in one transaction, while
// the shop keeps running: every demo product gets its name, description, image, price and
// stock back (a product that was removed is inserted again), and a missing demo tenant is
// created. It reports how many products it restored.
//
// Everything else is left as it is, on purpose: orders, payments, carts, idempotency keys,
// the journal and the mailbox are the history of what the room tried, and the gateway's
// ledger (another database) still matches them, so reconciliation stays clean. An existing
// tenant keeps its API key; products that are not part of the demo are not touched.
func ResetDemo(ctx context.Context, db *gorm.DB, tenants []DemoTenant) (int, error) {
	restored := 0
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, dt := range tenants {
			if dt.APIKey == "" {
				return fmt.Errorf("reset demo: tenant %s has no API key", dt.ID)
			}
			t := Tenant{ID: dt.ID, Name: dt.Name, APIKeyHash: HashAPIKey(dt.APIKey)}
			if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&t).Error; err != nil {
				return fmt.Errorf("reset demo tenant %s: %w", dt.ID, err)
			}
			products := dt.catalogue()
			if len(products) == 0 {
				continue
			}
			// One upsert per tenant: the same statement on PostgreSQL and SQLite.
			res := tx.Clauses(clause.OnConflict{
				Columns:   []clause.Column{{Name: "tenant_id"}, {Name: "sku"}},
				DoUpdates: clause.AssignmentColumns([]string{"name", "description", "image", "amount", "currency", "stock"}),
			}).Create(&products)
			if res.Error != nil {
				return fmt.Errorf("reset demo products of %s: %w", dt.ID, res.Error)
			}
			restored += len(products)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return restored, nil
}
