package models_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// BenchmarkReserveComplete measures one key's life on each database: the atomic INSERT … ON
// CONFLICT DO NOTHING that reserves it, then the fenced UPDATE that completes it.
func BenchmarkReserveComplete(b *testing.B) {
	for _, dialect := range modelstest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			db := modelstest.MustOpen(b, dialect)
			modelstest.MustSeed(b, db)
			s := models.NewIdempotencyStore(db)
			ctx := context.Background()
			header := http.Header{"Content-Type": {"application/json"}}
			body := []byte(`{"id":"ord_x","status":"pending_payment"}` + "\n")
			i := 0
			for b.Loop() {
				i++
				r, err := s.Reserve(ctx, reserveRequest("bench-"+strconv.Itoa(i)))
				if err != nil || r.Outcome != models.Reserved {
					b.Fatalf("reserve: got %v, %v, want reserved", r, err)
				}
				if err := r.Key.Complete(ctx, models.Response{Status: http.StatusCreated, Header: header, Body: body}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReserveReplay measures the read side: a reservation that finds a completed key.
func BenchmarkReserveReplay(b *testing.B) {
	for _, dialect := range modelstest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			db := modelstest.MustOpen(b, dialect)
			modelstest.MustSeed(b, db)
			s := models.NewIdempotencyStore(db)
			r := MustReserve(b, s, reserveRequest("replayed"), models.Reserved)
			MustComplete(b, r.Key, http.StatusCreated, "{}\n")
			for b.Loop() {
				MustReserve(b, s, reserveRequest("replayed"), models.Replay)
			}
		})
	}
}
