package main

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"checkoutlab/models/modelstest"
)

// TestStorefrontEndToEnd walks the shop as a person would, over HTTP against the real program:
// catalogue → add two products → change a quantity → cart total → checkout form → place the
// order → confirmation, paid, with one charge at the gateway. On both databases.
func TestStorefrontEndToEnd(t *testing.T) {
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			st := MustStartShop(t, dialect, fastEnv)
			jar, _ := cookiejar.New(nil)
			client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			var csrf string
			get := func(path string) *goquery.Document {
				t.Helper()
				res, err := client.Get(st.Shop + path)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				if res.StatusCode != http.StatusOK {
					t.Fatalf("GET %s: got %d, want 200", path, res.StatusCode)
				}
				doc, err := goquery.NewDocumentFromReader(res.Body)
				if err != nil {
					t.Fatal(err)
				}
				if tok, ok := doc.Find("input[name=_csrf]").First().Attr("value"); ok {
					csrf = tok
				}
				return doc
			}
			postForm := func(path string, v url.Values) string {
				t.Helper()
				v.Set("_csrf", csrf)
				res, err := client.PostForm(st.Shop+path, v)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != http.StatusSeeOther {
					t.Fatalf("POST %s: got %d, want 303", path, res.StatusCode)
				}
				return res.Header.Get("Location")
			}

			home := get("/")
			if n := home.Find(`[data-testid="product-card"]`).Length(); n < 6 {
				t.Fatalf("catalogue: got %d product cards, want at least 6", n)
			}
			if home.Find(`[data-testid="add-to-cart"]`).Length() == 0 || home.Find(`[data-testid="cart-link"]`).Length() != 1 {
				t.Fatalf("catalogue: add-to-cart or cart-link missing")
			}
			postForm("/shop/acme/cart/items", url.Values{"sku": {"camp-mug"}, "quantity": {"1"}})
			postForm("/shop/acme/cart/items", url.Values{"sku": {"headlamp"}, "quantity": {"1"}})
			get("/shop/acme/cart")
			postForm("/shop/acme/cart/items/camp-mug", url.Values{"quantity": {"3"}})
			cart := get("/shop/acme/cart")
			if n := cart.Find(`[data-testid="cart-line"]`).Length(); n != 2 {
				t.Errorf("cart: got %d lines, want 2", n)
			}
			if got := strings.TrimSpace(cart.Find(`[data-testid="cart-total"]`).Text()); got != "$81.00" {
				t.Errorf("cart total: got %q, want $81.00 (3 × $14.00 + $39.00)", got)
			}
			if cart.Find(`[data-testid="checkout-button"]`).Length() != 1 {
				t.Fatalf("cart: checkout-button missing")
			}
			form := get("/shop/acme/checkout")
			v := url.Values{}
			form.Find("form#checkout-form input[type=hidden]").Each(func(_ int, s *goquery.Selection) {
				v.Set(s.AttrOr("name", ""), s.AttrOr("value", ""))
			})
			for _, name := range []string{"email", "name", "address", "city", "postal_code", "country", "card_number"} {
				if form.Find(`[name="`+name+`"]`).Length() == 0 {
					t.Errorf("checkout form: no field named %s", name)
				}
			}
			v.Set("email", "grace@example.com")
			v.Set("name", "Grace Hopper")
			v.Set("address", "1 Compiler Road")
			v.Set("city", "Arlington")
			v.Set("postal_code", "22201")
			v.Set("country", "US")
			v.Set("shipping_method", "standard")
			v.Set("card_number", "4242424242424242")
			orderPath := postForm("/shop/acme/checkout", v)
			if !strings.HasPrefix(orderPath, "/orders/ord_") {
				t.Fatalf("place order: got redirect to %q, want the order page", orderPath)
			}
			page := get(orderPath)
			orderID := strings.TrimSpace(page.Find(`[data-testid="order-id"]`).Text())
			if page.Find(`[data-testid="order-confirmation"]`).Length() != 1 || "/orders/"+orderID != orderPath {
				t.Fatalf("confirmation: got order-id %q on %s", orderID, orderPath)
			}
			if got := strings.TrimSpace(page.Find(`[data-testid="order-status"]`).Text()); got != "Paid" {
				t.Errorf("status: got %q, want Paid", got)
			}
			if got := succeededCharges(t, st.Gateway, orderID); got != 1 {
				t.Errorf("succeeded charges: got %d, want 1", got)
			}
			// The back button and the same form again: the same order, no second charge.
			if again := postForm("/shop/acme/checkout", v); again != orderPath {
				t.Errorf("resubmit: got redirect to %q, want %q", again, orderPath)
			}
			if got := succeededCharges(t, st.Gateway, orderID); got != 1 {
				t.Errorf("succeeded charges after a resubmit: got %d, want 1", got)
			}
		})
	}
}
