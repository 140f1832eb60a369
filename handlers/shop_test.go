package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

func TestStorefrontCatalogue(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		srv := MustShop(t, db)
		b := MustBrowser(t, srv)
		for _, tc := range []struct{ name, path, wantProduct string }{
			{"AcmeAtRoot", "/", "Trail Pack 30L"},
			{"Acme", "/shop/acme", "Trail Pack 30L"},
			{"Globex", "/shop/globex", "Espresso Beans 1 kg"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				doc := b.MustGet(t, tc.path, http.StatusOK)
				cards := doc.Find(`[data-testid="product-card"]`)
				if cards.Length() < 6 {
					t.Errorf("got %d product cards, want at least 6", cards.Length())
				}
				if got := cards.Length(); got != doc.Find(`[data-testid="add-to-cart"]`).Length() {
					t.Errorf("got %d add-to-cart buttons, want one per card (%d)", doc.Find(`[data-testid="add-to-cart"]`).Length(), got)
				}
				if !strings.Contains(text(cards), tc.wantProduct) {
					t.Errorf("got cards %q, want one named %q", text(cards), tc.wantProduct)
				}
				if got := text(doc.Find(`[data-testid="cart-link"] .cart-count, [data-testid="cart-link"]`).First()); !strings.Contains(got, "0") {
					t.Errorf("cart link: got %q, want a count of 0", got)
				}
			})
		}
		t.Run("ProductPage", func(t *testing.T) {
			doc := b.MustGet(t, "/shop/globex/products/burr-grinder", http.StatusOK)
			if got, want := text(doc.Find("h1")), "Burr Grinder"; got != want {
				t.Errorf("got heading %q, want %q", got, want)
			}
			if got, want := text(doc.Find(".price-large")), "€129.00"; got != want {
				t.Errorf("got price %q, want %q", got, want)
			}
		})
		t.Run("ErrNotFoundUnknownTenant", func(t *testing.T) {
			doc := b.MustGet(t, "/shop/initech", http.StatusNotFound)
			if doc.Find(`[data-testid="error-page"]`).Length() != 1 {
				t.Errorf("got no error page for an unknown tenant, want one")
			}
		})
		t.Run("ErrNotFoundUnknownProductPage", func(t *testing.T) {
			b.MustGet(t, "/shop/acme/products/no-such-thing", http.StatusNotFound)
		})
		t.Run("ErrNotFoundOtherTenantsProduct", func(t *testing.T) {
			b.MustGet(t, "/shop/acme/products/burr-grinder", http.StatusNotFound)
		})
	})
}

func TestStorefrontCart(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		srv := MustShop(t, db)
		b := MustBrowser(t, srv)
		b.MustGet(t, "/shop/acme", http.StatusOK)

		cartTotal := func(t *testing.T) (string, int) {
			t.Helper()
			doc := b.MustGet(t, "/shop/acme/cart", http.StatusOK)
			return text(doc.Find(`[data-testid="cart-total"]`)), doc.Find(`[data-testid="cart-line"]`).Length()
		}
		t.Run("AddTwoProducts", func(t *testing.T) {
			b.MustAdd(t, "acme", "trail-pack-30", "1") // $89.00
			b.MustAdd(t, "acme", "camp-mug", "1")      // $14.00
			if total, lines := cartTotal(t); total != "$103.00" || lines != 2 {
				t.Errorf("got total %q with %d lines, want $103.00 with 2", total, lines)
			}
		})
		t.Run("ChangeQuantity", func(t *testing.T) {
			resp, _ := b.MustPost(t, "/shop/acme/cart/items/camp-mug", url.Values{"quantity": {"3"}}, http.StatusSeeOther)
			if got := MustLocation(t, resp); !strings.HasPrefix(got, "/shop/acme/cart") {
				t.Errorf("got redirect to %q, want the cart", got)
			}
			if total, _ := cartTotal(t); total != "$131.00" {
				t.Errorf("got total %q, want $131.00", total)
			}
		})
		t.Run("Remove", func(t *testing.T) {
			b.MustPost(t, "/shop/acme/cart/items/trail-pack-30/delete", nil, http.StatusSeeOther)
			if total, lines := cartTotal(t); total != "$42.00" || lines != 1 {
				t.Errorf("got total %q with %d lines, want $42.00 with 1", total, lines)
			}
		})
		t.Run("QuantityZeroRemoves", func(t *testing.T) {
			b.MustAdd(t, "acme", "headlamp", "2")
			b.MustPost(t, "/shop/acme/cart/items/headlamp", url.Values{"quantity": {"0"}}, http.StatusSeeOther)
			if total, lines := cartTotal(t); total != "$42.00" || lines != 1 {
				t.Errorf("got total %q with %d lines, want $42.00 with 1", total, lines)
			}
		})
		t.Run("HTMXAddAnswersPartial", func(t *testing.T) {
			_, doc := b.MustPost(t, "/shop/acme/cart/items", url.Values{"sku": {"steel-bottle"}, "quantity": {"1"}},
				http.StatusOK, "HX-Request", "true")
			link := doc.Find(`[data-testid="cart-link"]`)
			if link.AttrOr("hx-swap-oob", "") != "true" || !strings.Contains(text(link), "4") {
				t.Errorf("got cart link %q (oob %q), want an out-of-band count of 4", text(link), link.AttrOr("hx-swap-oob", ""))
			}
		})
		t.Run("HTMXQuantityAnswersCartSection", func(t *testing.T) {
			_, doc := b.MustPost(t, "/shop/acme/cart/items/steel-bottle", url.Values{"quantity": {"2"}},
				http.StatusOK, "HX-Request", "true")
			if got, want := text(doc.Find(`[data-testid="cart-total"]`)), "$100.00"; got != want {
				t.Errorf("got total %q, want %q", got, want)
			}
		})
		t.Run("CartsAreSeparatePerTenant", func(t *testing.T) {
			doc := b.MustGet(t, "/shop/globex/cart", http.StatusOK)
			if n := doc.Find(`[data-testid="cart-line"]`).Length(); n != 0 {
				t.Errorf("got %d lines in the globex cart, want 0", n)
			}
		})
	})
}

func TestStorefrontCheckout(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		srv := MustShop(t, db)
		b := MustBrowser(t, srv)
		b.MustGet(t, "/shop/acme", http.StatusOK)

		t.Run("EmptyCartRedirectsToCart", func(t *testing.T) {
			resp, _ := b.MustPost(t, "/shop/acme/checkout", url.Values{}, http.StatusSeeOther)
			if got := MustLocation(t, resp); got != "/shop/acme/cart?notice=empty" {
				t.Errorf("got redirect to %q, want /shop/acme/cart?notice=empty", got)
			}
			b.MustGet(t, "/shop/acme/checkout", http.StatusSeeOther)
		})

		b.MustAdd(t, "acme", "camp-mug", "2") // $28.00
		b.MustAdd(t, "acme", "headlamp", "1") // $39.00
		form := b.MustGet(t, "/shop/acme/checkout", http.StatusOK)

		t.Run("FormHasContractFields", func(t *testing.T) {
			for _, name := range []string{"_csrf", "email", "name", "address", "city", "postal_code", "country",
				"shipping_method", "card_number", "idempotency_key"} {
				if form.Find(`form#checkout-form [name="`+name+`"]`).Length() == 0 {
					t.Errorf("got no field named %q, want one", name)
				}
			}
			if got := form.Find("form#checkout-form input").First().AttrOr("name", ""); got != "_csrf" {
				t.Errorf("got first input %q, want _csrf", got)
			}
			if form.Find(`input[name=idempotency_key]`).AttrOr("value", "") == "" {
				t.Errorf("got an empty idempotency_key, want one made by the server")
			}
			for _, id := range []string{"place-order", "checkout-status"} {
				if form.Find(`[data-testid="`+id+`"]`).Length() != 1 {
					t.Errorf("got no data-testid=%q, want one", id)
				}
			}
			if n := form.Find(`select[name=country] option[value="DE"]`).Length(); n != 1 {
				t.Errorf("got %d DE options, want 1", n)
			}
			// Listed in groups of four, as printed on a card; "Use" fills in the digits.
			if !strings.Contains(text(form.Find(`[data-testid="test-cards"]`)), "4000 0000 0000 0119") ||
				form.Find(`[data-testid="test-cards"] [data-card="4000000000000119"]`).Length() != 1 {
				t.Errorf("got no test card list with 4000 0000 0000 0119 and its Use button, want one")
			}
		})
		t.Run("MissingFieldsRerenderWithErrors", func(t *testing.T) {
			v := checkoutValues(form)
			v.Del("email")
			v.Set("city", " ")
			v.Set("card_number", "4242424242424241") // Luhn fails
			_, doc := b.MustPost(t, "/shop/acme/checkout", v, http.StatusUnprocessableEntity)
			for _, field := range []string{"email", "city", "card_number"} {
				in := doc.Find(`[name="` + field + `"]`)
				if in.AttrOr("aria-invalid", "") != "true" {
					t.Errorf("%s: got aria-invalid %q, want true", field, in.AttrOr("aria-invalid", ""))
				}
				errID := in.AttrOr("aria-describedby", "")
				if !strings.Contains(errID, "f-"+field+"-error") || text(doc.Find("#f-"+field+"-error")) == "" {
					t.Errorf("%s: got aria-describedby %q and no inline error, want both", field, errID)
				}
			}
			if got, want := doc.Find(`[name=name]`).AttrOr("value", ""), "Ada Lovelace"; got != want {
				t.Errorf("kept value: got %q, want %q", got, want)
			}
			if got, want := doc.Find(`input[name=idempotency_key]`).AttrOr("value", ""), v.Get("idempotency_key"); got != want {
				t.Errorf("idempotency key: got %q, want the form's %q", got, want)
			}
			if n := MustCount(t, db, &models.Order{}); n != 0 {
				t.Errorf("got %d orders, want 0", n)
			}
		})
		t.Run("ErrCountryNotOffered", func(t *testing.T) {
			v := checkoutValues(form)
			v.Set("country", "ZZ")
			_, doc := b.MustPost(t, "/shop/acme/checkout", v, http.StatusUnprocessableEntity)
			if text(doc.Find("#f-country-error")) == "" {
				t.Errorf("got no country error, want one")
			}
		})

		var orderPath string
		t.Run("PlaceOrder", func(t *testing.T) {
			resp, _ := b.MustPost(t, "/shop/acme/checkout", checkoutValues(form), http.StatusSeeOther)
			orderPath = MustLocation(t, resp)
			if !strings.HasPrefix(orderPath, "/orders/ord_") {
				t.Fatalf("got redirect to %q, want /orders/ord_…", orderPath)
			}
			var orders []models.Order
			if err := db.Find(&orders).Error; err != nil {
				t.Fatal(err)
			}
			if len(orders) != 1 || orders[0].Status != models.OrderPaid || orders[0].Amount != 2800+3900+1500 {
				t.Fatalf("got orders %+v, want one paid order of 8200", orders)
			}
			doc := b.MustGet(t, orderPath, http.StatusOK)
			if doc.Find(`[data-testid="order-confirmation"]`).Length() != 1 {
				t.Errorf("got no order-confirmation, want one")
			}
			if got, want := text(doc.Find(`[data-testid="order-id"]`)), orders[0].ID; got != want {
				t.Errorf("order-id: got %q, want %q", got, want)
			}
			if got, want := text(doc.Find(`[data-testid="order-status"]`)), "Paid"; got != want {
				t.Errorf("status: got %q, want %q", got, want)
			}
			if got, want := text(doc.Find(`[data-testid="order-total"]`)), "$82.00"; got != want {
				t.Errorf("total: got %q, want %q", got, want)
			}
			cart := b.MustGet(t, "/shop/acme/cart", http.StatusOK)
			if n := cart.Find(`[data-testid="cart-line"]`).Length(); n != 0 {
				t.Errorf("got %d cart lines after the order, want 0", n)
			}
			if got := text(cart.Find(`[data-testid="cart-link"] .cart-count`)); got != "0" {
				t.Errorf("cart count: got %q, want 0", got)
			}
		})
		t.Run("DoubleSubmitYieldsSameOrder", func(t *testing.T) {
			resp, _ := b.MustPost(t, "/shop/acme/checkout", checkoutValues(form), http.StatusSeeOther)
			if got := MustLocation(t, resp); got != orderPath {
				t.Errorf("got redirect to %q, want the first order %q", got, orderPath)
			}
			if n := MustCount(t, db, &models.Order{}); n != 1 {
				t.Errorf("got %d orders, want 1", n)
			}
		})
		t.Run("OrderHistory", func(t *testing.T) {
			doc := b.MustGet(t, "/shop/acme/orders", http.StatusOK)
			if got := doc.Find(`[data-testid="order-row"]`).Length(); got != 1 {
				t.Errorf("got %d orders in the history, want 1", got)
			}
			other := MustBrowser(t, srv)
			if got := other.MustGet(t, "/shop/acme/orders", http.StatusOK).Find(`[data-testid="order-row"]`).Length(); got != 0 {
				t.Errorf("another session sees %d orders, want 0", got)
			}
		})
		t.Run("ErrNotFoundUnknownOrder", func(t *testing.T) {
			b.MustGet(t, "/orders/ord_nothere", http.StatusNotFound)
		})
	})
}

func TestStorefrontBadInput(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		srv := MustShop(t, db)
		b := MustBrowser(t, srv)
		b.MustGet(t, "/shop/acme", http.StatusOK)
		b.MustAdd(t, "acme", "camp-mug", "2")
		lines := func() int64 { return MustCount(t, db, &models.CartLine{}) }
		quantityOf := func(t *testing.T) string {
			t.Helper()
			return b.MustGet(t, "/shop/acme/cart", http.StatusOK).Find(`input[name=quantity]`).AttrOr("value", "")
		}

		t.Run("ErrUnknownProduct", func(t *testing.T) {
			_, doc := b.MustPost(t, "/shop/acme/cart/items", url.Values{"sku": {"flux-capacitor"}, "quantity": {"1"}}, http.StatusNotFound)
			if doc.Find(`[data-testid="error-page"]`).Length() != 1 {
				t.Errorf("got no error page, want one")
			}
			if n := lines(); n != 1 {
				t.Errorf("got %d cart lines, want 1", n)
			}
		})
		for _, q := range []string{"0", "1000", "-1", "two"} {
			t.Run("ErrInvalidQuantity"+q, func(t *testing.T) {
				_, doc := b.MustPost(t, "/shop/acme/cart/items", url.Values{"sku": {"camp-mug"}, "quantity": {q}}, http.StatusBadRequest)
				if msg := text(doc.Find(`[data-testid="error-page"] p`).First()); !strings.Contains(strings.ToLower(msg), "quantity") {
					t.Errorf("got message %q, want one about the quantity", msg)
				}
				if got := quantityOf(t); got != "2" {
					t.Errorf("got quantity %s in the cart, want 2", got)
				}
			})
		}
		t.Run("ErrInvalidSetQuantity1000", func(t *testing.T) {
			b.MustPost(t, "/shop/acme/cart/items/camp-mug", url.Values{"quantity": {"1000"}}, http.StatusBadRequest)
			if got := quantityOf(t); got != "2" {
				t.Errorf("got quantity %s in the cart, want 2", got)
			}
		})
		t.Run("ErrNoCSRFToken", func(t *testing.T) {
			_, doc := b.MustPost(t, "/shop/acme/cart/items", url.Values{"sku": {"headlamp"}, "quantity": {"1"}, "_csrf": {""}}, http.StatusBadRequest)
			if msg := text(doc.Find(`[data-testid="error-page"] p`).First()); !strings.Contains(msg, "reload the page") {
				t.Errorf("got message %q, want one asking to reload the page", msg)
			}
			if n := lines(); n != 1 {
				t.Errorf("got %d cart lines, want 1", n)
			}
		})
		t.Run("ErrWrongCSRFToken", func(t *testing.T) {
			b.MustPost(t, "/shop/acme/cart/items", url.Values{"sku": {"headlamp"}, "quantity": {"1"}, "_csrf": {"forged"}}, http.StatusBadRequest)
			if n := lines(); n != 1 {
				t.Errorf("got %d cart lines, want 1", n)
			}
		})
		t.Run("ErrNoCSRFOnCheckout", func(t *testing.T) {
			form := b.MustGet(t, "/shop/acme/checkout", http.StatusOK)
			v := checkoutValues(form)
			v.Set("_csrf", "")
			b.MustPost(t, "/shop/acme/checkout", v, http.StatusBadRequest)
			if n := MustCount(t, db, &models.Order{}); n != 0 {
				t.Errorf("got %d orders, want 0", n)
			}
		})
		t.Run("ErrBodyTooLarge", func(t *testing.T) {
			big := url.Values{"sku": {"headlamp"}, "quantity": {"1"}, "padding": {strings.Repeat("x", 100<<10)}}
			b.MustPost(t, "/shop/acme/cart/items", big, http.StatusRequestEntityTooLarge)
			if n := lines(); n != 1 {
				t.Errorf("got %d cart lines, want 1", n)
			}
		})
		t.Run("ErrOutOfStock", func(t *testing.T) {
			_, doc := b.MustPost(t, "/shop/acme/cart/items", url.Values{"sku": {"brass-compass"}, "quantity": {"6"}}, http.StatusConflict)
			if msg := text(doc.Find(`[data-testid="error-page"] p`).First()); !strings.Contains(msg, "only 5") {
				t.Errorf("got message %q, want one saying only 5 are left", msg)
			}
			if n := lines(); n != 1 {
				t.Errorf("got %d cart lines, want 1", n)
			}
		})
		t.Run("ErrHTMXGetsErrorPage", func(t *testing.T) {
			_, doc := b.MustPost(t, "/shop/acme/cart/items", url.Values{"sku": {"nope"}, "quantity": {"1"}}, http.StatusNotFound, "HX-Request", "true")
			if doc.Find(`main#main [data-testid="error-page"]`).Length() != 1 {
				t.Errorf("got no error page inside main#main, want one for htmx to swap in")
			}
		})
		t.Run("APIHasNoSessionOrCSRF", func(t *testing.T) {
			resp, err := http.Get(srv.URL + "/api/v1/products")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
				t.Errorf("got status %d with %d cookies, want 401 with none", resp.StatusCode, len(resp.Cookies()))
			}
		})
		t.Run("ErrNotFoundUnknownTenantPost", func(t *testing.T) {
			b.MustPost(t, "/shop/initech/cart/items", url.Values{"sku": {"camp-mug"}, "quantity": {"1"}}, http.StatusNotFound)
		})
	})
}

// TestStorefrontConcurrentSubmits sends the same checkout form several times at once, as an
// impatient double (or quadruple) click would: every answer must point at one and the same
// order.
func TestStorefrontConcurrentSubmits(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		srv := MustShop(t, db)
		b := MustBrowser(t, srv)
		b.MustGet(t, "/shop/globex", http.StatusOK)
		b.MustAdd(t, "globex", "espresso-beans", "2")
		form := checkoutValues(b.MustGet(t, "/shop/globex/checkout", http.StatusOK))
		form.Set("_csrf", b.csrf)

		const submits = 4
		type result struct {
			status   int
			location string
			err      error
		}
		results := make(chan result, submits)
		var wg sync.WaitGroup
		for range submits {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := b.client.PostForm(srv.URL+"/shop/globex/checkout", form)
				if err != nil {
					results <- result{err: err}
					return
				}
				resp.Body.Close()
				results <- result{status: resp.StatusCode, location: resp.Header.Get("Location")}
			}()
		}
		wg.Wait()
		close(results)
		// A submit that finds the first one still running is sent to the pending page, which
		// sends it on to the order once the outcome is known.
		locations := map[string]int{}
		for r := range results {
			if r.err != nil || r.status != http.StatusSeeOther {
				t.Errorf("got status %d (err %v), want 303", r.status, r.err)
				continue
			}
			if strings.Contains(r.location, "/checkout/pending?") {
				resp, _ := b.MustGetResponse(t, r.location, http.StatusSeeOther)
				r.location = MustLocation(t, resp)
			}
			locations[r.location]++
		}
		if len(locations) != 1 {
			t.Errorf("got redirects to %v, want every submit sent to one order", locations)
		}
		if n := MustCount(t, db, &models.Order{}); n != 1 {
			t.Errorf("got %d orders, want 1", n)
		}
	})
}
