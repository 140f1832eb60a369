package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"checkoutlab/handlers"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
)

// get sends a GET with the given headers (name, value, …) through client.
func get(tb testing.TB, client *http.Client, rawURL string, headers ...string) (*http.Response, string) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return mustDo(tb, client, req)
}

func jsonError(body string) string {
	var e struct{ Error string }
	_ = json.Unmarshal([]byte(body), &e)
	return e.Error
}

// TestOperatorPages: the mailbox, reconciliation and the lab list every tenant's customers or
// start whole shops, so without an operator session a browser is sent to the login form and
// anything else gets 401; the password, or the one-click token, lets the operator in.
func TestOperatorPages(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		s := MustSecureShop(t, db, false)
		base := s.srv.URL
		anon := noRedirects()
		html := []string{"Accept", "text/html,application/xhtml+xml"}

		t.Run("RefusedWithoutLogin", func(t *testing.T) {
			for _, path := range []string{"/mailbox", "/reconciliation?tenant=globex", "/lab", "/lab/runs/run_1", "/ops/reset-demo"} {
				resp, _ := get(t, anon, base+path, html...)
				want := "/ops/login?next=" + url.QueryEscape(path)
				if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
					t.Errorf("browser GET %s: got %d to %q, want 303 to %q", path, resp.StatusCode, resp.Header.Get("Location"), want)
				}
				resp, body := get(t, anon, base+path)
				if resp.StatusCode != http.StatusUnauthorized || jsonError(body) != "operator_login_required" {
					t.Errorf("script GET %s: got %d %s, want 401 operator_login_required", path, resp.StatusCode, body)
				}
			}
			for _, path := range []string{"/lab/lost_response/run", "/ops/reset-demo"} {
				resp, body := mustDo(t, anon, mustRequest(t, http.MethodPost, base+path, "mode=protected",
					"Content-Type", echo.MIMEApplicationForm))
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("POST %s: got %d %s, want 401", path, resp.StatusCode, body)
				}
			}
			// The guard matches routes, not spellings of them.
			resp, _ := get(t, anon, base+"/%6Cab", html...)
			if resp.StatusCode == http.StatusOK {
				t.Errorf("GET /%%6Cab: got 200, want no lab page without login")
			}
			// A forged or tampered operator cookie is no session.
			forged := s.ops.SessionCookie()
			forged.Value = "9999999999." + strings.SplitN(forged.Value, ".", 2)[1]
			req := mustRequest(t, http.MethodGet, base+"/mailbox", "")
			req.AddCookie(forged)
			if resp, _ := mustDo(t, anon, req); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("a cookie with a changed expiry: got %d, want 401", resp.StatusCode)
			}
			// Not an operator route: a page whose name only starts like one.
			if resp, _ := get(t, anon, base+"/laboratory"); resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET /laboratory: got %d, want 404", resp.StatusCode)
			}
		})

		t.Run("Password", func(t *testing.T) {
			b := MustBrowser(t, s.srv)
			b.MustGet(t, "/ops/login?next=/reconciliation?tenant=globex", http.StatusOK)
			_, page := b.MustPost(t, "/ops/login", url.Values{"password": {"guess"}, "next": {"/mailbox"}}, http.StatusUnauthorized)
			if page.Find(`[data-testid="ops-login-form"]`).Length() != 1 {
				t.Errorf("a wrong password did not show the form again")
			}
			resp, _ := b.MustPost(t, "/ops/login", url.Values{"password": {testOpsPassword}, "next": {"/reconciliation?tenant=globex"}}, http.StatusSeeOther)
			if got := MustLocation(t, resp); got != "/reconciliation?tenant=globex" {
				t.Errorf("after login: got redirect to %q, want back to the page asked for", got)
			}
			for _, path := range []string{"/mailbox", "/reconciliation?tenant=acme", "/lab", "/ops/reset-demo"} {
				b.MustGet(t, path, http.StatusOK)
			}
			// Logging out ends it.
			b.MustGet(t, "/ops/login", http.StatusSeeOther)
			b.MustPost(t, "/ops/logout", nil, http.StatusSeeOther)
			resp, _ = get(t, b.client, base+"/mailbox")
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("after logout: got %d, want 401", resp.StatusCode)
			}
		})

		t.Run("OneClickToken", func(t *testing.T) {
			b := MustBrowser(t, s.srv)
			b.MustGet(t, "/ops/login?token=not-the-token", http.StatusUnauthorized)
			login, err := url.Parse(s.ops.LoginURL(base))
			if err != nil {
				t.Fatal(err)
			}
			resp, _ := b.MustGetResponse(t, login.RequestURI(), http.StatusSeeOther)
			if got := MustLocation(t, resp); got != "/lab" {
				t.Errorf("token login: got redirect to %q, want /lab", got)
			}
			b.MustGet(t, "/mailbox", http.StatusOK)
		})

		t.Run("NextStaysOnSite", func(t *testing.T) {
			for _, next := range []string{"//evil.example/", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"} {
				b := MustBrowser(t, s.srv)
				b.MustGet(t, "/ops/login", http.StatusOK)
				resp, _ := b.MustPost(t, "/ops/login", url.Values{"password": {testOpsPassword}, "next": {next}}, http.StatusSeeOther)
				if got := MustLocation(t, resp); got != "/lab" {
					t.Errorf("next=%q: got redirect to %q, want /lab", next, got)
				}
			}
		})
	})
}

func mustRequest(tb testing.TB, method, rawURL, body string, headers ...string) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(method, rawURL, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

// mustPlaceOrder checks out one camp mug as b and returns the order's page path.
func mustPlaceOrder(tb testing.TB, b *browser, card string) string {
	tb.Helper()
	b.MustGet(tb, "/shop/acme", http.StatusOK)
	b.MustAdd(tb, "acme", "camp-mug", "1")
	form := checkoutValues(b.MustGet(tb, "/shop/acme/checkout", http.StatusOK))
	form.Set("card_number", card)
	resp, _ := b.MustPost(tb, "/shop/acme/checkout", form, http.StatusSeeOther)
	path := MustLocation(tb, resp)
	if !strings.HasPrefix(path, "/orders/ord_") {
		tb.Fatalf("checkout: got redirect to %q, want the order page", path)
	}
	return path
}

// TestOrderPageAccess: an order page shows a name, an address and an e-mail address: only the
// session that placed the order sees it, or whoever holds the receipt's signed link. Another
// visitor — also one who sends the owner's session id in a cookie the server did not sign —
// gets 404, as for an order that does not exist.
func TestOrderPageAccess(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		s := MustSecureShop(t, db, false)
		owner := MustBrowser(t, s.srv)
		path := mustPlaceOrder(t, owner, "4242424242424242")
		orderID := strings.TrimPrefix(path, "/orders/")
		owner.MustGet(t, path, http.StatusOK)

		stranger := MustBrowser(t, s.srv)
		stranger.MustGet(t, path, http.StatusNotFound)
		stranger.MustGet(t, path+"?poll=payment", http.StatusNotFound)
		link := s.signer.OrderLink(orderID)
		if doc := stranger.MustGet(t, link, http.StatusOK); text(doc.Find(`[data-testid="order-id"]`)) != orderID {
			t.Errorf("the signed link did not show order %s", orderID)
		}
		stranger.MustGet(t, link[:len(link)-2]+"xx", http.StatusNotFound)
		other := s.signer.OrderLink("ord_other")
		stranger.MustGet(t, path+"?sig="+other[strings.Index(other, "sig=")+4:], http.StatusNotFound)

		// Session fixation: the owner's id, chosen by the client instead of made by the server.
		var sessionID string
		if err := db.Model(&models.Order{}).Where("id = ?", orderID).Pluck("session_id", &sessionID).Error; err != nil || sessionID == "" {
			t.Fatalf("session of the order: %q, %v", sessionID, err)
		}
		for _, cookie := range []string{sessionID, sessionID + ".forged", sessionID + "." + strings.Repeat("A", 43)} {
			req := mustRequest(t, http.MethodGet, s.srv.URL+path, "")
			req.AddCookie(&http.Cookie{Name: handlers.SessionCookie, Value: cookie})
			resp, _ := mustDo(t, noRedirects(), req)
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("cookie %q: got %d, want 404", cookie, resp.StatusCode)
			}
			fresh := ""
			for _, c := range resp.Cookies() {
				if c.Name == handlers.SessionCookie {
					fresh = c.Value
				}
			}
			if fresh == "" || strings.HasPrefix(fresh, sessionID) {
				t.Errorf("cookie %q: got session cookie %q back, want a new session", cookie, fresh)
			}
		}
	})
}

// TestBadBytesRefused: a NUL byte or invalid UTF-8 in a JSON field, a form field, a path or a
// query parameter is 400 invalid_request before anything is written: no order, no
// idempotency key left behind (PostgreSQL used to answer 500, SQLSTATE 22021, and keep the key).
func TestBadBytesRefused(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		s := MustSecureShop(t, db, false)
		base := s.srv.URL
		order := func(email, name string) string {
			return `{"items":[{"sku":"camp-mug","quantity":1}],"email":"` + email + `","shipping_address":{"name":"` + name +
				`","address":"1 Analytical Way","city":"London","postal_code":"N1 9GU","country":"GB"}}`
		}
		api := func(method, path, body, key string) *http.Request {
			return mustRequest(t, method, base+path, body, "Authorization", "Bearer sk_test_acme",
				"Content-Type", echo.MIMEApplicationJSON, "Idempotency-Key", key)
		}
		cases := map[string]*http.Request{
			"JSONEscapedNUL":   api(http.MethodPost, "/api/v1/orders", order(`ada\u0000@example.com`, "Ada"), "k1"),
			"JSONRawNUL":       api(http.MethodPost, "/api/v1/orders", order("ada@example.com", "Ada\x00"), "k2"),
			"JSONInvalidUTF8":  api(http.MethodPost, "/api/v1/orders", order("ada@example.com", "Ad\xffa"), "k3"),
			"JSONKeyNUL":       api(http.MethodPost, "/api/v1/orders", `{"items\u0000":[]}`, "k4"),
			"CheckoutCardNUL":  api(http.MethodPost, "/api/v1/checkout", strings.TrimSuffix(order("ada@example.com", "Ada"), "}")+`,"card_number":"4242\u0000"}`, "k5"),
			"PathNUL":          api(http.MethodGet, "/api/v1/orders/ord%00x", "", "k6"),
			"PathInvalidUTF8":  api(http.MethodGet, "/api/v1/orders/ord%ffx", "", "k7"),
			"QueryNUL":         mustRequest(t, http.MethodGet, base+"/shop/acme?notice=%00", ""),
			"QueryInvalidUTF8": mustRequest(t, http.MethodGet, base+"/shop/acme/products/mug?x=%C3%28", ""),
			"QueryKeyNUL":      mustRequest(t, http.MethodGet, base+"/shop/acme?%00=1", ""),
			"OrderPathNUL":     mustRequest(t, http.MethodGet, base+"/orders/%00", ""),
		}
		for name, req := range cases {
			t.Run(name, func(t *testing.T) {
				resp, body := mustDo(t, noRedirects(), req)
				if resp.StatusCode != http.StatusBadRequest || (strings.HasPrefix(req.URL.Path, "/api/") && jsonError(body) != "invalid_request") {
					t.Errorf("got %d %.300s, want 400 invalid_request", resp.StatusCode, body)
				}
			})
		}

		// The storefront's forms: the checkout and the add-to-cart form.
		b := MustBrowser(t, s.srv)
		b.MustGet(t, "/shop/acme", http.StatusOK)
		b.MustAdd(t, "acme", "camp-mug", "1")
		form := checkoutValues(b.MustGet(t, "/shop/acme/checkout", http.StatusOK))
		for field, value := range map[string]string{"name": "Ada\x00", "city": "Lon\xffdon", "card_number": "4242\x00"} {
			bad := url.Values{}
			for k, v := range form {
				bad[k] = v
			}
			bad.Set(field, value)
			b.MustPost(t, "/shop/acme/checkout", bad, http.StatusBadRequest)
		}
		b.MustPost(t, "/shop/acme/cart/items", url.Values{"sku": {"camp\x00mug"}, "quantity": {"1"}}, http.StatusBadRequest)

		if n := MustCount(t, db, &models.IdempotencyRecord{}); n != 0 {
			t.Errorf("got %d idempotency keys, want none left behind", n)
		}
		if n := MustCount(t, db, &models.Order{}); n != 0 {
			t.Errorf("got %d orders, want none", n)
		}
		// The same form, clean, still goes through under the same key.
		b.MustPost(t, "/shop/acme/checkout", form, http.StatusSeeOther)
	})
}

// TestStalledBody: a client that sends its headers and then stalls its body past the server's
// read timeout gets 408 request_timeout — not 503 database_unavailable, which would send an
// operator looking at a healthy database — and no key is reserved.
func TestStalledBody(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		s := MustSecureShop(t, db, true)
		s.srv.Config.ReadTimeout = 500 * time.Millisecond
		s.srv.Start()
		conn, err := net.Dial("tcp", s.srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /api/v1/orders HTTP/1.1\r\nHost: shop\r\nAuthorization: Bearer sk_test_acme\r\n"+
			"Idempotency-Key: stalled\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{\"items\":")
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout || jsonError(string(body)) != "request_timeout" {
			t.Errorf("got %d %s, want 408 request_timeout", resp.StatusCode, body)
		}
		if n := MustCount(t, db, &models.IdempotencyRecord{}); n != 0 {
			t.Errorf("got %d idempotency keys, want none", n)
		}
	})
}

// TestMetricsMethodLabelBounded: any token is a valid HTTP method, and each new label value is
// a time series kept for ever. 5,000 made-up methods must not grow /metrics.
func TestMetricsMethodLabelBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := handlers.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	(&handlers.Ops{Ping: func(context.Context) error { return nil }, Registry: reg}).Routes(e)
	series := func() (int, int) {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return strings.Count(rec.Body.String(), "\ncheckoutlab_http_requests_total{"), rec.Body.Len()
	}
	send := func(method string) {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(method, "/healthz", nil))
	}
	send("BREW")
	series() // /metrics itself is one more series
	before, size := series()
	for i := 0; i < 5000; i++ {
		send(fmt.Sprintf("M%04d", i))
	}
	after, grown := series()
	if after != before || grown > size+200 {
		t.Errorf("after 5,000 odd methods: %d series (%d bytes), want %d (about %d bytes)", after, grown, before, size)
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(rec.Body.String(), `method="other"`) {
		t.Errorf("no method=\"other\" series in /metrics")
	}
}

// inlineCode finds what a strict Content-Security-Policy would block in a page: an inline
// script, a style attribute or element, an inline event handler, a javascript: URL.
var inlineCode = regexp.MustCompile(`(?i)<script(\s[^>]*)?>\s*[^<\s]|<script>|\sstyle\s*=|<style|\son[a-z]+\s*=|javascript:`)

// TestSecurityHeaders: every page carries the Content-Security-Policy, nosniff, the referrer
// policy and, outside /static, Cache-Control: no-store — and the pages really satisfy the
// policy: no inline script, style or event handler.
func TestSecurityHeaders(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		s := MustSecureShop(t, db, false)
		b := MustBrowser(t, s.srv)
		orderPath := mustPlaceOrder(t, b, "4000000000000002") // declined: the page has the pay form
		b.MustGet(t, "/ops/login", http.StatusOK)
		b.MustPost(t, "/ops/login", url.Values{"password": {testOpsPassword}, "next": {"/lab"}}, http.StatusSeeOther)
		pages := []string{"/", "/shop/acme", "/shop/acme/products/camp-mug", "/shop/acme/cart", "/shop/acme/orders",
			orderPath, "/ops/login?next=/mailbox", "/mailbox", "/reconciliation", "/lab", "/ops/reset-demo", "/no/such/page"}
		b.MustAdd(t, "acme", "headlamp", "1")
		pages = append(pages, "/shop/acme/checkout")
		for _, path := range pages {
			resp, body := get(t, b.client, s.srv.URL+path, "Accept", "text/html")
			h := resp.Header
			if h.Get("Content-Security-Policy") != handlers.ContentSecurityPolicy || h.Get("X-Content-Type-Options") != "nosniff" ||
				h.Get("Referrer-Policy") != "same-origin" || h.Get("Cache-Control") != "no-store" {
				t.Errorf("GET %s (%d): CSP %q, nosniff %q, Referrer-Policy %q, Cache-Control %q", path, resp.StatusCode,
					h.Get("Content-Security-Policy"), h.Get("X-Content-Type-Options"), h.Get("Referrer-Policy"), h.Get("Cache-Control"))
			}
			if m := inlineCode.FindString(body); m != "" {
				t.Errorf("GET %s: %q would be blocked by the policy", path, m)
			}
		}
		resp, _ := get(t, b.client, s.srv.URL+"/static/css/shop.css")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") == "no-store" {
			t.Errorf("a static file: got %d with Cache-Control %q, want 200 and cacheable", resp.StatusCode, resp.Header.Get("Cache-Control"))
		}
	})
}

// TestHostCheck: with allowed hosts set, a request for a host name the shop does not have —
// how a DNS rebinding page would reach it — gets 421; its own names and loopback pass.
func TestHostCheck(t *testing.T) {
	hosts := handlers.AllowedHosts("https://shop.example.com", "0.0.0.0:8080")
	e := handlers.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry(), handlers.WithAllowedHosts(hosts))
	e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	for host, want := range map[string]int{
		"shop.example.com": 200, "SHOP.example.com.": 200, "shop.example.com:443": 200, "localhost:8080": 200,
		"127.0.0.1:8080": 200, "[::1]:8080": 200, "rebind.attacker.example": 421, "0.0.0.0:8080": 421, "": 421,
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %q: got %d, want %d", host, rec.Code, want)
		}
	}
}

// TestExpiredOrder: an order declined and then left alone expires after ORDER_HOLD (short
// here): its stock is back, its page says so and offers no payment, and a payment of it
// answers 409 order_expired.
func TestExpiredOrder(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		s := MustSecureShop(t, db, false)
		b := MustBrowser(t, s.srv)
		b.MustGet(t, "/shop/acme", http.StatusOK)
		b.MustAdd(t, "acme", "brass-compass", "5") // every one there is
		form := checkoutValues(b.MustGet(t, "/shop/acme/checkout", http.StatusOK))
		form.Set("card_number", "4000000000000002")
		resp, _ := b.MustPost(t, "/shop/acme/checkout", form, http.StatusSeeOther)
		path := MustLocation(t, resp)
		orderID := strings.TrimPrefix(path, "/orders/")
		payForm := formValues(b.MustGet(t, path, http.StatusOK).Find(`[data-testid="pay-form"]`))
		if stock := mustStock(t, db, "brass-compass"); stock != 0 {
			t.Fatalf("compass stock after the declined order: got %d, want 0", stock)
		}

		const hold = time.Second
		time.Sleep(hold + 100*time.Millisecond)
		expiry := &payments.Expiry{Orders: models.NewOrderStore(db), Hold: hold}
		if n, err := expiry.RunOnce(context.Background()); err != nil || n != 1 {
			t.Fatalf("expiry: got %d, %v; want 1 order expired", n, err)
		}
		if stock := mustStock(t, db, "brass-compass"); stock != 5 {
			t.Errorf("compass stock after expiry: got %d, want 5", stock)
		}
		page := b.MustGet(t, path, http.StatusOK)
		if got := text(page.Find(`[data-testid="order-status"]`)); got != "Expired" {
			t.Errorf("order status: got %q, want Expired", got)
		}
		if page.Find(`[data-testid="pay-form"]`).Length() != 0 || !strings.Contains(page.Text(), "went back on sale") {
			t.Errorf("the expired order's page offers to pay, or does not say the items went back on sale")
		}

		payForm.Set("card_number", "4242424242424242")
		payForm.Set("_csrf", b.csrf)
		req := mustRequest(t, http.MethodPost, s.srv.URL+"/shop/acme/orders/"+orderID+"/pay", payForm.Encode(),
			"Content-Type", echo.MIMEApplicationForm)
		if resp, body := mustDo(t, b.client, req); resp.StatusCode >= 500 {
			t.Errorf("paying the expired order in the browser: got %d %.300s", resp.StatusCode, body)
		}
		var o models.Order
		if err := db.Where("id = ?", orderID).Take(&o).Error; err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`{"order_id":%q,"amount":%d,"currency":%q,"card_number":"4242424242424242"}`, orderID, o.Amount, o.Currency)
		resp, got := mustDo(t, noRedirects(), mustRequest(t, http.MethodPost, s.srv.URL+"/api/v1/payments", body,
			"Authorization", "Bearer sk_test_acme", "Content-Type", echo.MIMEApplicationJSON, "Idempotency-Key", "pay-expired"))
		if resp.StatusCode != http.StatusConflict || jsonError(got) != "order_expired" {
			t.Errorf("API payment of the expired order: got %d %s, want 409 order_expired", resp.StatusCode, got)
		}
		if err := db.Where("id = ?", orderID).Take(&o).Error; err != nil {
			t.Fatal(err)
		}
		var paid int64
		db.Model(&models.Payment{}).Where("order_id = ? AND status = ?", orderID, models.PaymentSucceeded).Count(&paid)
		if paid != 0 || o.Status != models.OrderExpired {
			t.Errorf("order %s: status %q with %d succeeded payments, want expired and none", orderID, o.Status, paid)
		}
	})
}

func mustStock(tb testing.TB, db *gorm.DB, sku string) int {
	tb.Helper()
	p, err := models.NewProductStore(db).BySKU(context.Background(), "acme", sku)
	if err != nil {
		tb.Fatal(err)
	}
	return p.Stock
}

// TestQuantityCap: one line holds at most MaxLineQuantity units — in the cart and in an API
// order — a clear 400, so one order cannot take a product's whole demo stock.
func TestQuantityCap(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		s := MustSecureShop(t, db, false)
		over := fmt.Sprint(models.MaxLineQuantity + 1)
		body := `{"items":[{"sku":"camp-mug","quantity":` + over + `}],"email":"ada@example.com","shipping_address":{"name":"Ada",` +
			`"address":"1 Analytical Way","city":"London","postal_code":"N1 9GU","country":"GB"}}`
		resp, got := mustDo(t, noRedirects(), mustRequest(t, http.MethodPost, s.srv.URL+"/api/v1/orders", body,
			"Authorization", "Bearer sk_test_acme", "Content-Type", echo.MIMEApplicationJSON, "Idempotency-Key", "many"))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(got, "items[0]") {
			t.Errorf("API order of %s: got %d %s, want 400 naming items[0]", over, resp.StatusCode, got)
		}
		b := MustBrowser(t, s.srv)
		b.MustGet(t, "/shop/acme", http.StatusOK)
		b.MustPost(t, "/shop/acme/cart/items", url.Values{"sku": {"camp-mug"}, "quantity": {over}}, http.StatusBadRequest)
		if stock := mustStock(t, db, "camp-mug"); stock != 1000 {
			t.Errorf("camp-mug stock: got %d, want 1000", stock)
		}
	})
}
