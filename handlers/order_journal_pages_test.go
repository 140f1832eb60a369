package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// TestOrderPageJournalPages: a client that replays its key thousands of times, or an order
// with a long history, no longer makes the order page grow without end: repeated answers are
// counted on one row and the journal comes 100 events a page, with links between pages.
func TestOrderPageJournalPages(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		s := MustSecureShop(t, db, false)
		b := MustBrowser(t, s.srv)
		path := mustPlaceOrder(t, b, "4242424242424242")
		orderID := strings.TrimPrefix(path, "/orders/")
		var key string
		if err := db.Model(&models.JournalEvent{}).Where("order_id = ? AND idempotency_key IS NOT NULL", orderID).
			Limit(1).Pluck("idempotency_key", &key).Error; err != nil || key == "" {
			t.Fatalf("the order's key: %q, %v", key, err)
		}
		j := models.NewJournalStore(db, nil)
		ctx := context.Background()
		for i := 0; i < 300; i++ {
			j.Record(ctx, models.JournalEvent{TenantID: "acme", IdempotencyKey: key, Actor: models.ActorShop,
				Kind: models.JournalReservation, Detail: "replayed: the stored answer 303, nothing ran"})
		}
		for i := 0; i < 150; i++ {
			j.Record(ctx, models.JournalEvent{TenantID: "acme", OrderID: orderID, Actor: models.ActorOutbox,
				Kind: models.JournalReceipt, Detail: fmt.Sprintf("delivered: receipt %d", i)})
		}
		var total int64
		db.Model(&models.JournalEvent{}).Where("order_id = ? OR idempotency_key = ?", orderID, key).Count(&total)
		if total > 200 {
			t.Fatalf("the journal holds %d rows after 300 replays and 150 receipts, want the replays counted", total)
		}

		first := b.MustGet(t, path, http.StatusOK)
		journal := first.Find(`[data-testid="journal"]`)
		if n := journal.Find(`[data-testid="journal-event"]`).Length(); n != 100 {
			t.Errorf("first page: got %d events, want 100", n)
		}
		if _, open := journal.Attr("open"); open || first.Find(`[data-testid="journal-earlier"]`).Length() != 0 {
			t.Errorf("first page: got it open, or a link to earlier events")
		}
		if !strings.Contains(journal.Find("summary").Text(), fmt.Sprintf("events 1–100 of %d", total)) {
			t.Errorf("summary: got %q, want events 1–100 of %d", journal.Find("summary").Text(), total)
		}
		if !strings.Contains(journal.Text(), "more like it") {
			t.Errorf("the replays are not counted on the page")
		}
		later, ok := first.Find(`[data-testid="journal-later"]`).Attr("href")
		if !ok {
			t.Fatal("first page: no link to later events")
		}
		second := b.MustGet(t, later, http.StatusOK)
		if _, open := second.Find(`[data-testid="journal"]`).Attr("open"); !open {
			t.Errorf("second page: the journal is folded away, want it open")
		}
		if n := second.Find(`[data-testid="journal-event"]`).Length(); int64(n) != total-100 {
			t.Errorf("second page: got %d events, want %d", n, total-100)
		}
		if second.Find(`[data-testid="journal-earlier"]`).Length() != 1 || second.Find(`[data-testid="journal-later"]`).Length() != 0 {
			t.Errorf("second (last) page: want a link to earlier events and none to later ones")
		}
	})
}
