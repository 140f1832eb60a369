package models_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

func TestOrderListSince(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		ctx := context.Background()
		orders := models.NewOrderStore(db)
		t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		// Placed out of time order; two of them a microsecond apart, the precision of PostgreSQL.
		late := modelstest.MustOrderAt(t, db, "acme", "camp-mug", t0.Add(time.Second))
		first := modelstest.MustOrderAt(t, db, "acme", "camp-mug", t0)
		half := modelstest.MustOrderAt(t, db, "acme", "headlamp", t0.Add(500*time.Millisecond))
		halfPlus := modelstest.MustOrderAt(t, db, "acme", "camp-mug", t0.Add(500*time.Millisecond+time.Microsecond))
		modelstest.MustOrderAt(t, db, "globex", "paper-filters", t0.Add(2*time.Second))
		declined := modelstest.MustSettledPayment(t, db, first, models.PaymentFailed, "card_declined")
		succeeded := modelstest.MustSettledPayment(t, db, first, models.PaymentSucceeded, "")

		ids := func(os []models.Order) []string {
			out := []string{}
			for _, o := range os {
				out = append(out, o.ID)
			}
			return out
		}
		for _, tc := range []struct {
			name  string
			after time.Time
			limit int
			want  []string
		}{
			{"All", time.Time{}, 100, []string{first.ID, half.ID, halfPlus.ID, late.ID}},
			{"Limit", time.Time{}, 2, []string{first.ID, half.ID}},
			{"StrictlyAfter", t0.Add(500 * time.Millisecond), 100, []string{halfPlus.ID, late.ID}},
			{"JustBefore", t0.Add(500*time.Millisecond - time.Nanosecond), 100, []string{half.ID, halfPlus.ID, late.ID}},
			{"OtherZone", t0.Add(500 * time.Millisecond).In(time.FixedZone("CEST", 2*3600)), 100, []string{halfPlus.ID, late.ID}},
			{"None", t0.Add(time.Second), 100, []string{}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				os, err := orders.ListSince(ctx, "acme", tc.after, tc.limit)
				if err != nil {
					t.Fatal(err)
				}
				if got := ids(os); !slices.Equal(got, tc.want) {
					t.Errorf("got %q, want %q", got, tc.want)
				}
			})
		}
		t.Run("LinesAndPayments", func(t *testing.T) {
			os, err := orders.ListSince(ctx, "acme", time.Time{}, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(os) != 2 || len(os[0].Lines) != 1 || os[0].Lines[0].SKU != "camp-mug" || len(os[1].Lines) != 1 {
				t.Fatalf("got %+v, want two orders with one line each", os)
			}
			var pays []string
			for _, p := range os[0].Payments {
				pays = append(pays, p.ID+" "+p.Status)
			}
			want := []string{declined.ID + " failed", succeeded.ID + " succeeded"}
			if !slices.Equal(pays, want) {
				t.Errorf("payments: got %q, want %q (oldest first)", pays, want)
			}
			if os[0].Status != models.OrderPaid || len(os[1].Payments) != 0 {
				t.Errorf("got status %q and %d payments on the second order, want paid and 0", os[0].Status, len(os[1].Payments))
			}
		})
	})
}
