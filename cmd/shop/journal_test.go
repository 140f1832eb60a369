package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// TestJournal checks that the real code paths write an order's story: reservations and
// dispositions, phases, gateway calls and what the ledger lookup found, webhook decisions and
// outbox deliveries, in the order they happened, on both databases.
func TestJournal(t *testing.T) {
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			st := MustStartShop(t, dialect, fastEnv)
			journal := models.NewJournalStore(st.DB, nil)
			ctx := context.Background()

			t.Run("LostResponseThenRetry", func(t *testing.T) {
				// The webhook is held back so that the retry, not the webhook, settles the
				// payment: the retry must ask the gateway's ledger before charging.
				armFault(t, st.Gateway, map[string]any{"fault": "webhook_delay", "delay_ms": 2500})
				body := checkoutBody("4000000000000119")
				first := post(st.Shop, "/api/v1/checkout", "journal-lost", body)
				if first.Status != http.StatusBadGateway {
					t.Fatalf("first attempt: got %d %s, want 502", first.Status, first.Raw)
				}
				a, _ := retryUntilFinal(t, st.Shop, "/api/v1/checkout", "journal-lost", body, 30)
				orderID := a.OrderID()
				if a.Status != http.StatusCreated || orderID == "" {
					t.Fatalf("retry: got %d %s, want 201 with the order", a.Status, a.Raw)
				}
				var lines []string
				eventually(t, 15*time.Second, "both webhooks and both deliveries in the journal", func() bool {
					evs, err := journal.ForOrder(ctx, orderID)
					if err != nil {
						t.Fatal(err)
					}
					lines = journalLines(evs)
					// charge.pending and charge.succeeded are two deliveries: wait for the last.
					return hasLine(lines, "webhook delivery no_change: charge.succeeded") && hasLine(lines, "outbox receipt delivered") &&
						hasLine(lines, "outbox shipment delivered")
				})
				t.Logf("journal of %s:\n  %s", orderID, strings.Join(lines, "\n  "))
				mustInOrder(t, lines,
					"shop reservation reserved: a new key",
					"database phase payment_created",
					"gateway charge unknown",
					"shop disposition released: 502",
					"shop reservation reserved: taken over, resuming at payment_created|completer claim claimed: abandoned at payment_created",
					"gateway lookup found the charge",
					"database phase finished: payment succeeded",
					"outbox receipt delivered",
				)
				mustInOrder(t, lines, "database phase finished", "webhook delivery no_change: charge.succeeded")
				mustInOrder(t, lines, "database phase finished", "outbox shipment delivered")
				if n := countLines(lines, "gateway charge"); n != 1 {
					t.Errorf("got %d gateway charges in the journal, want 1: %q", n, lines)
				}
				// The ops view: the order page lists the same events (and any that came since).
				// An API order has no browser session: its page opens with the receipt's link.
				page := mustPage(t, http.DefaultClient, st.OrderLink(orderID))
				if n := page.Find(`[data-testid="journal"] [data-testid="journal-event"]`).Length(); n < len(lines) {
					t.Errorf("order page: got %d journal rows, want at least %d", n, len(lines))
				}
				for _, l := range lines {
					if strings.Contains(l, "4000000000000119") || strings.Contains(l, "@") {
						t.Errorf("got a card number or an e-mail address in the journal: %q", l)
					}
				}
			})

			t.Run("DuplicateWebhook", func(t *testing.T) {
				a, _ := retryUntilFinal(t, st.Shop, "/api/v1/checkout", "journal-dup", checkoutBody("4000000000000770"), 30)
				orderID := a.OrderID()
				if a.Status != http.StatusCreated || orderID == "" {
					t.Fatalf("got %d %s, want 201 with the order", a.Status, a.Raw)
				}
				eventually(t, 15*time.Second, "duplicate webhook decisions in the journal", func() bool {
					evs, err := journal.ForOrder(ctx, orderID)
					if err != nil {
						t.Fatal(err)
					}
					return countLines(journalLines(evs), "webhook delivery duplicate") >= 2
				})
			})
		})
	}
}

func journalLines(evs []models.JournalEvent) []string {
	lines := make([]string, len(evs))
	for i, e := range evs {
		lines[i] = e.Actor + " " + e.Kind + " " + e.Detail
	}
	return lines
}

func hasLine(lines []string, prefix string) bool { return countLines(lines, prefix) > 0 }

func countLines(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// mustInOrder checks that lines contain, in this order (not necessarily next to each other),
// a line starting with each of prefixes; "a|b" accepts either.
func mustInOrder(tb testing.TB, lines []string, prefixes ...string) {
	tb.Helper()
	i := 0
	for _, want := range prefixes {
		for ; i < len(lines); i++ {
			if matchesAny(lines[i], strings.Split(want, "|")) {
				break
			}
		}
		if i == len(lines) {
			tb.Errorf("journal: got no %q after the earlier events, in:\n  %s", want, strings.Join(lines, "\n  "))
			return
		}
		i++
	}
}

func matchesAny(line string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(line, p) })
}
