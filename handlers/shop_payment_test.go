package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// TestStorefrontPayment: the checkout form runs the real checkout operation against the fake
// gateway, without JavaScript. A decline leads to the order page, which offers another card
// (a new operation, a new key); a lost response leads to the pending page, never to an offer
// to pay again, and the same form sent again (the back button) resumes the same operation.
func TestStorefrontPayment(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		srv := MustShop(t, db)

		t.Run("DeclinedThenAnotherCard", func(t *testing.T) {
			b := MustBrowser(t, srv)
			b.MustGet(t, "/shop/acme", http.StatusOK)
			b.MustAdd(t, "acme", "camp-mug", "1")
			form := checkoutValues(b.MustGet(t, "/shop/acme/checkout", http.StatusOK))
			form.Set("card_number", "4000000000009995")
			resp, _ := b.MustPost(t, "/shop/acme/checkout", form, http.StatusSeeOther)
			orderPath := MustLocation(t, resp)
			page := b.MustGet(t, orderPath, http.StatusOK)
			if got := text(page.Find(`[data-testid="order-status"]`)); got != "Payment failed" {
				t.Errorf("status: got %q, want Payment failed", got)
			}
			if got := text(page.Find(`[data-testid="payment-declined"]`)); !strings.Contains(got, "insufficient funds") {
				t.Errorf("decline: got %q, want the reason", got)
			}
			pay := page.Find(`form[data-testid="pay-form"]`)
			if pay.Length() != 1 {
				t.Fatalf("got %d pay forms, want 1", pay.Length())
			}
			v := map[string][]string{"card_number": {"4242424242424242"}}
			values := formValues(pay)
			for k, vs := range v {
				values[k] = vs
			}
			resp, _ = b.MustPost(t, pay.AttrOr("action", ""), values, http.StatusSeeOther)
			if got := MustLocation(t, resp); got != orderPath {
				t.Errorf("after paying: got redirect to %q, want %q", got, orderPath)
			}
			page = b.MustGet(t, orderPath, http.StatusOK)
			if got := text(page.Find(`[data-testid="order-status"]`)); got != "Paid" {
				t.Errorf("status after the second card: got %q, want Paid", got)
			}
			if page.Find(`form[data-testid="pay-form"]`).Length() != 0 {
				t.Errorf("a paid order still offers to pay")
			}
			// The same pay form again (a double click) replays: still one succeeded payment.
			b.MustPost(t, pay.AttrOr("action", ""), values, http.StatusSeeOther)
			var succeeded int64
			db.Model(&models.Payment{}).Where("status = ?", models.PaymentSucceeded).Count(&succeeded)
			if succeeded != 1 {
				t.Errorf("got %d succeeded payments, want 1", succeeded)
			}
		})

		t.Run("LostResponseWaitsHonestly", func(t *testing.T) {
			b := MustBrowser(t, srv)
			b.MustGet(t, "/shop/acme", http.StatusOK)
			b.MustAdd(t, "acme", "headlamp", "1")
			form := checkoutValues(b.MustGet(t, "/shop/acme/checkout", http.StatusOK))
			form.Set("card_number", "4000000000000119") // charged, then the answer is lost
			resp, _ := b.MustPost(t, "/shop/acme/checkout", form, http.StatusSeeOther)
			pending := MustLocation(t, resp)
			if !strings.Contains(pending, "/checkout/pending?key=") {
				t.Fatalf("got redirect to %q, want the pending page", pending)
			}
			resp, page := b.MustGetResponse(t, pending, http.StatusAccepted)
			status := text(page.Find(`[data-testid="checkout-status"]`))
			if !strings.Contains(status, "you will not be charged twice") || page.Find(`[data-testid="place-order"]`).Length() != 0 {
				t.Errorf("pending page: got %q with a pay button=%v, want an honest wait and no way to pay again",
					status, page.Find(`[data-testid="place-order"]`).Length() != 0)
			}
			if resp.Header.Get("Refresh") == "" {
				t.Errorf("pending page does not refresh itself")
			}
			// A reload of the checkout page meanwhile shows the order being confirmed, not an
			// empty cart.
			resp, _ = b.MustGetResponse(t, "/shop/acme/checkout", http.StatusSeeOther)
			if got := MustLocation(t, resp); !strings.HasPrefix(got, "/orders/ord_") {
				t.Errorf("checkout page while confirming: got redirect to %q, want the order", got)
			}
			// The back button and the same form again: the same key resumes the operation.
			resp, _ = b.MustPost(t, "/shop/acme/checkout", form, http.StatusSeeOther)
			orderPath := MustLocation(t, resp)
			if !strings.HasPrefix(orderPath, "/orders/") {
				t.Fatalf("got redirect to %q, want the order", orderPath)
			}
			if got := text(b.MustGet(t, orderPath, http.StatusOK).Find(`[data-testid="order-status"]`)); got != "Paid" {
				t.Errorf("status: got %q, want Paid", got)
			}
			// And the pending page now sends the browser to that order.
			resp, _ = b.MustGetResponse(t, pending, http.StatusSeeOther)
			if got := MustLocation(t, resp); got != orderPath {
				t.Errorf("pending page: got redirect to %q, want %q", got, orderPath)
			}
			var paid int64
			db.Model(&models.Payment{}).Where("status = ?", models.PaymentSucceeded).Count(&paid)
			if paid != 2 { // this order's and the previous subtest's
				t.Errorf("got %d succeeded payments, want 2", paid)
			}
		})

		t.Run("SecondTabGetsTheSameOrder", func(t *testing.T) {
			// Two tabs show the checkout form for one cart, each with its own key. The second
			// submit is a second operation, refused because the cart is already an order, and
			// the browser is sent to that order: never a blank page, never a second order.
			b := MustBrowser(t, srv)
			b.MustGet(t, "/shop/acme", http.StatusOK)
			b.MustAdd(t, "acme", "steel-bottle", "1")
			tab1 := checkoutValues(b.MustGet(t, "/shop/acme/checkout", http.StatusOK))
			tab2 := checkoutValues(b.MustGet(t, "/shop/acme/checkout", http.StatusOK))
			if tab1.Get("idempotency_key") == tab2.Get("idempotency_key") {
				t.Fatalf("two form views got the same key")
			}
			resp, _ := b.MustPost(t, "/shop/acme/checkout", tab1, http.StatusSeeOther)
			first := MustLocation(t, resp)
			resp, _ = b.MustPost(t, "/shop/acme/checkout", tab2, http.StatusSeeOther)
			if got := MustLocation(t, resp); got != first {
				t.Errorf("second tab: got redirect to %q, want the first order %q", got, first)
			}
		})

		t.Run("ErrOutOfStockAtCheckout", func(t *testing.T) {
			// Two customers hold the last five compasses in their carts; the second to check
			// out gets the form back with the reason, and pays nothing.
			first, second := MustBrowser(t, srv), MustBrowser(t, srv)
			for _, b := range []*browser{first, second} {
				b.MustGet(t, "/shop/acme", http.StatusOK)
				b.MustAdd(t, "acme", "brass-compass", "5")
			}
			form1 := checkoutValues(first.MustGet(t, "/shop/acme/checkout", http.StatusOK))
			form2 := checkoutValues(second.MustGet(t, "/shop/acme/checkout", http.StatusOK))
			first.MustPost(t, "/shop/acme/checkout", form1, http.StatusSeeOther)
			_, doc := second.MustPost(t, "/shop/acme/checkout", form2, http.StatusConflict)
			if msg := text(doc.Find(`[role=alert]`)); !strings.Contains(msg, "stock") {
				t.Errorf("got message %q, want the out-of-stock reason", msg)
			}
			if doc.Find(`[data-testid="place-order"]`).Length() != 1 {
				t.Errorf("the form is not shown again")
			}
		})

		t.Run("ErrOtherSessionsPendingPage", func(t *testing.T) {
			b := MustBrowser(t, srv)
			b.MustGet(t, "/shop/acme/checkout/pending?key=nobody", http.StatusSeeOther)
		})
	})
}
