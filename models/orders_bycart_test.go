package models_test

import (
	"context"
	"errors"
	"testing"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

func TestOrderByCart(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		ctx := context.Background()
		carts, orders := models.NewCartStore(db), models.NewOrderStore(db)
		if err := carts.Add(ctx, "acme", "sess1", "camp-mug", 2); err != nil {
			t.Fatal(err)
		}
		cart, err := carts.Current(ctx, "acme", "sess1")
		if err != nil {
			t.Fatal(err)
		}

		t.Run("ErrNotFoundBeforeOrder", func(t *testing.T) {
			if _, err := orders.ByCart(ctx, "acme", cart.ID); !errors.Is(err, models.ErrNotFound) {
				t.Errorf("got %v, want ErrNotFound", err)
			}
		})
		in := validOrder(models.Item{SKU: "camp-mug", Quantity: 2})
		in.CartID, in.SessionID = cart.ID, "sess1"
		placed, err := orders.Create(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		t.Run("OK", func(t *testing.T) {
			got, err := orders.ByCart(ctx, "acme", cart.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != placed.ID || len(got.Lines) != 1 {
				t.Errorf("got order %s with %d lines, want %s with 1", got.ID, len(got.Lines), placed.ID)
			}
		})
		t.Run("ErrNotFoundOtherTenant", func(t *testing.T) {
			if _, err := orders.ByCart(ctx, "globex", cart.ID); !errors.Is(err, models.ErrNotFound) {
				t.Errorf("got %v, want ErrNotFound", err)
			}
		})
	})
}
