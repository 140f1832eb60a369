package models_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

func validOrder(items ...models.Item) models.NewOrder {
	return models.NewOrder{
		TenantID: "acme", Email: "ada@example.com",
		Shipping: models.Address{Name: "Ada Lovelace", Address: "1 Analytical Way", City: "London", PostalCode: "N1 9GU", Country: "gb"},
		Items:    items,
	}
}

func TestOrderCreate(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		ctx := context.Background()
		orders := models.NewOrderStore(db)
		products := models.NewProductStore(db)

		t.Run("OK", func(t *testing.T) {
			o, err := orders.Create(ctx, validOrder(models.Item{SKU: "camp-mug", Quantity: 2}, models.Item{SKU: "headlamp", Quantity: 1}))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := o.Amount, int64(2*1400+3900); got != want {
				t.Errorf("amount: got %d, want %d", got, want)
			}
			got, err := orders.Get(ctx, "acme", o.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != models.OrderPendingPayment || len(got.Lines) != 2 || got.ShippingCountry != "GB" {
				t.Errorf("got status %q, %d lines, country %q", got.Status, len(got.Lines), got.ShippingCountry)
			}
			p, _ := products.BySKU(ctx, "acme", "camp-mug")
			if p.Stock != 998 {
				t.Errorf("stock: got %d, want 998", p.Stock)
			}
		})
		t.Run("ErrNotFoundOtherTenant", func(t *testing.T) {
			o, err := orders.Create(ctx, validOrder(models.Item{SKU: "camp-mug", Quantity: 1}))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := orders.Get(ctx, "globex", o.ID); !errors.Is(err, models.ErrNotFound) {
				t.Errorf("got %v, want ErrNotFound", err)
			}
		})
		t.Run("ErrUnknownProduct", func(t *testing.T) {
			_, err := orders.Create(ctx, validOrder(models.Item{SKU: "espresso-beans", Quantity: 1}))
			if !errors.Is(err, models.ErrUnknownProduct) {
				t.Errorf("got %v, want ErrUnknownProduct", err)
			}
		})
		t.Run("ErrInvalid", func(t *testing.T) {
			in := validOrder(models.Item{SKU: "camp-mug", Quantity: 0})
			in.Email = "not-an-email"
			_, err := orders.Create(ctx, in)
			e := models.ErrorOf(err)
			if e.Kind != models.KindInvalid || e.Fields["email"] == "" || e.Fields["items[0]"] == "" {
				t.Errorf("got %#v, want invalid email and items[0]", e)
			}
		})
		t.Run("ErrOutOfStockRace", func(t *testing.T) {
			// Five units of the compass, ten buyers of one each at once: exactly five win.
			var wg sync.WaitGroup
			var mu sync.Mutex
			won, lost := 0, 0
			for i := 0; i < 10; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := orders.Create(ctx, validOrder(models.Item{SKU: "brass-compass", Quantity: 1}))
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						won++
					case errors.Is(err, models.ErrOutOfStock):
						lost++
					default:
						t.Errorf("unexpected error: %v", err)
					}
				}()
			}
			wg.Wait()
			if won != 5 || lost != 5 {
				t.Errorf("got %d won and %d out of stock, want 5 and 5", won, lost)
			}
			p, _ := products.BySKU(ctx, "acme", "brass-compass")
			if p.Stock != 0 {
				t.Errorf("stock: got %d, want 0", p.Stock)
			}
		})
	})
}

func TestCart(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		ctx := context.Background()
		carts := models.NewCartStore(db)
		orders := models.NewOrderStore(db)

		if err := carts.Add(ctx, "acme", "sess1", "camp-mug", 2); err != nil {
			t.Fatal(err)
		}
		if err := carts.Add(ctx, "acme", "sess1", "camp-mug", 1); err != nil {
			t.Fatal(err)
		}
		if err := carts.Add(ctx, "acme", "sess1", "headlamp", 1); err != nil {
			t.Fatal(err)
		}
		if err := carts.SetQuantity(ctx, "acme", "sess1", "headlamp", 4); err != nil {
			t.Fatal(err)
		}
		c, err := carts.Current(ctx, "acme", "sess1")
		if err != nil {
			t.Fatal(err)
		}
		total, cur := c.Total()
		if total != 3*1400+4*3900 || cur != "USD" || len(c.Lines) != 2 {
			t.Fatalf("got total %d %s with %d lines, want %d USD with 2", total, cur, len(c.Lines), 3*1400+4*3900)
		}
		if err := carts.Add(ctx, "acme", "sess1", "camp-mug", 97); models.ErrorOf(err).Kind != models.KindInvalid {
			t.Errorf("adding past 99: got %v, want invalid", err)
		}
		if err := carts.Add(ctx, "acme", "sess1", "brass-compass", 6); !errors.Is(err, models.ErrOutOfStock) {
			t.Errorf("adding past stock: got %v, want ErrOutOfStock", err)
		}
		if err := carts.Add(ctx, "acme", "sess1", "espresso-beans", 1); !errors.Is(err, models.ErrUnknownProduct) {
			t.Errorf("other tenant's product: got %v, want ErrUnknownProduct", err)
		}
		if err := carts.Remove(ctx, "acme", "sess1", "headlamp"); err != nil {
			t.Fatal(err)
		}
		c, _ = carts.Current(ctx, "acme", "sess1")
		if len(c.Lines) != 1 {
			t.Fatalf("after remove: got %d lines, want 1", len(c.Lines))
		}

		in := validOrder(models.Item{SKU: "camp-mug", Quantity: 3})
		in.CartID, in.SessionID = c.ID, "sess1"
		if _, err := orders.Create(ctx, in); err != nil {
			t.Fatal(err)
		}
		if _, err := orders.Create(ctx, in); !errors.Is(err, models.ErrCartConverted) {
			t.Errorf("second order from one cart: got %v, want ErrCartConverted", err)
		}
		c, _ = carts.Current(ctx, "acme", "sess1")
		if c.ID != "" || len(c.Lines) != 0 {
			t.Errorf("after checkout: got cart %q with %d lines, want a fresh empty cart", c.ID, len(c.Lines))
		}
		list, err := orders.ListForSession(ctx, "acme", "sess1")
		if err != nil || len(list) != 1 {
			t.Errorf("order history: got %d orders (%v), want 1", len(list), err)
		}
	})
}
