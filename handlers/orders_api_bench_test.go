package handlers_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// BenchmarkOrderReplay measures a replayed POST /api/v1/orders through the whole router
// (authentication, fingerprint, reservation that finds the completed key, byte copy).
func BenchmarkOrderReplay(b *testing.B) {
	for _, dialect := range modelstest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			a := MustAPI(b, modelstest.MustOpen(b, dialect), 30*time.Second)
			MustStatus(b, a.post(b, request{key: "bench", body: orderBody}), http.StatusCreated, "")
			for b.Loop() {
				if rec := a.post(b, request{key: "bench", body: orderBody}); rec.Code != http.StatusCreated {
					b.Fatalf("status: got %d, want 201", rec.Code)
				}
			}
		})
	}
}

// BenchmarkOrderCreate measures a first POST /api/v1/orders: reservation, order and stock in
// one transaction with the key's completion. Compare it with BenchmarkOrderReplay.
func BenchmarkOrderCreate(b *testing.B) {
	for _, dialect := range modelstest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			a := MustAPI(b, modelstest.MustOpen(b, dialect), 30*time.Second)
			// Enough stock for any benchmark run: we measure placing orders, not running out.
			if err := a.db.Model(&models.Product{}).Where("stock > 0").Update("stock", 1<<30).Error; err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				i++
				if rec := a.post(b, request{key: "create-" + strconv.Itoa(i), body: orderBody}); rec.Code != http.StatusCreated {
					b.Fatalf("status: got %d, want 201 (%s)", rec.Code, rec.Body)
				}
			}
		})
	}
}
