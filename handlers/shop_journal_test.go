package handlers_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"gorm.io/gorm"

	"checkoutlab/models/modelstest"
)

// TestOrderPageJournal checks the ops view: the order page lists, under "What happened", the
// events the real code paths recorded for the order, oldest first, with millisecond times.
func TestOrderPageJournal(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		srv := MustShop(t, db)
		b := MustBrowser(t, srv)
		b.MustGet(t, "/shop/acme", http.StatusOK)
		b.MustAdd(t, "acme", "camp-mug", "1")
		form := b.MustGet(t, "/shop/acme/checkout", http.StatusOK)
		resp, _ := b.MustPost(t, "/shop/acme/checkout", checkoutValues(form), http.StatusSeeOther)
		doc := b.MustGet(t, MustLocation(t, resp), http.StatusOK)

		journal := doc.Find(`[data-testid="journal"]`)
		if journal.Length() != 1 {
			t.Fatalf("got %d journal sections, want 1", journal.Length())
		}
		if _, open := journal.Attr("open"); open {
			t.Errorf("got an open journal, want it folded away")
		}
		var got []string
		ms := regexp.MustCompile(`^\d{2}:\d{2}:\d{2}\.\d{3}$`)
		journal.Find(`[data-testid="journal-event"]`).Each(func(i int, row *goquery.Selection) {
			if at := text(row.Find("time")); !ms.MatchString(at) {
				t.Errorf("row %d: got time %q, want hh:mm:ss.mmm", i, at)
			}
			got = append(got, text(row.Find(".journal-actor"))+" "+text(row.Find(".journal-what")))
		})
		want := []string{
			"shop reservation reserved: a new key",
			"database phase payment_created",
			"gateway charge succeeded",
			"database phase finished: payment succeeded",
			"shop disposition stored: 201",
		}
		if len(got) != len(want) {
			t.Fatalf("got %d rows %q, want %d", len(got), got, len(want))
		}
		for i := range want {
			if !strings.HasPrefix(got[i], want[i]) {
				t.Errorf("row %d: got %q, want it to start with %q", i, got[i], want[i])
			}
		}
		if strings.Contains(journal.Text(), "4242") || strings.Contains(journal.Text(), "@") {
			t.Errorf("got a card number or an e-mail address in the journal: %q", journal.Text())
		}
	})
}
