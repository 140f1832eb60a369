package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// TestOrderPageJournalLive: while an order's operation is young, "What happened" refreshes
// itself (the webhook, the receipt and the shipment come after the answer): the list asks for
// itself again, and that answer is the list alone with the newest events. Once the order has
// been quiet for a while, the list no longer asks.
func TestOrderPageJournalLive(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		s := MustSecureShop(t, db, false)
		b := MustBrowser(t, s.srv)
		path := mustPlaceOrder(t, b, "4242424242424242")
		orderID := strings.TrimPrefix(path, "/orders/")

		list := b.MustGet(t, path, http.StatusOK).Find(`[data-testid="journal-events"]`)
		poll, live := list.Attr("hx-get")
		if !live || !strings.Contains(poll, "poll=journal") || list.AttrOr("hx-trigger", "") != "every 2s" {
			t.Fatalf("a fresh order's journal: got hx-get %q (live %v), want it to poll itself every 2s", poll, live)
		}
		before := list.Find(`[data-testid="journal-event"]`).Length()
		models.NewJournalStore(db, nil).Record(t.Context(), models.JournalEvent{TenantID: "acme", OrderID: orderID,
			Actor: models.ActorOutbox, Kind: models.JournalReceipt, Detail: "delivered: the receipt, after the answer"})

		req, _ := http.NewRequest(http.MethodGet, s.srv.URL+poll, nil)
		req.Header.Set("HX-Request", "true")
		res, err := b.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := goquery.NewDocumentFromReader(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("poll: got %d, %v; want 200", res.StatusCode, err)
		}
		if doc.Find(`[data-testid="journal"]`).Length() != 0 || doc.Find(`header`).Length() != 0 {
			t.Errorf("poll: got more than the list (a page or the <details>); the open state would be lost")
		}
		got := doc.Find(`[data-testid="journal-events"] [data-testid="journal-event"]`)
		if got.Length() != before+1 || !strings.Contains(got.Last().Text(), "after the answer") {
			t.Errorf("poll: got %d events (last %q), want %d ending with the new receipt", got.Length(), got.Last().Text(), before+1)
		}

		// An hour later the order is quiet: the list is drawn without a poll.
		// Every event of the tenant: the order's own and its key's.
		if err := db.Model(&models.JournalEvent{}).Where("tenant_id = ?", "acme").
			Update("at", time.Now().Add(-time.Hour)).Error; err != nil {
			t.Fatal(err)
		}
		if _, live := b.MustGet(t, path, http.StatusOK).Find(`[data-testid="journal-events"]`).Attr("hx-get"); live {
			t.Errorf("a quiet order's journal still polls itself")
		}
	})
}
