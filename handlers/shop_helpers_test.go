package handlers_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"checkoutlab/fakegateway"
	"checkoutlab/handlers"
	"checkoutlab/handlers/idempotency"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
)

// MustShop starts the real router with the storefront on a seeded db, wired as cmd/shop does,
// with the payment operations talking to a real fake gateway (its own SQLite database).
// Side effects are not delivered here: cmd/shop's end-to-end tests cover the job queue.
func MustShop(tb testing.TB, db *gorm.DB) *httptest.Server {
	tb.Helper()
	modelstest.MustSeed(tb, db)
	reg := prometheus.NewRegistry()
	e := handlers.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	orders := models.NewOrderStore(db)
	keys := models.NewIdempotencyStore(db)
	cards := handlers.NewCardFingerprint([]byte("test shop secret, 32 bytes long!"))
	journal := models.NewJournalStore(db, nil)
	service := &payments.Service{DB: db, Gateway: MustGatewayClient(tb),
		Outbox: noOutbox{}, Render: handlers.RenderOperation, Journal: journal}
	(&handlers.Storefront{
		Tenants: models.NewTenantStore(db), Products: models.NewProductStore(db), Carts: models.NewCartStore(db),
		Orders: orders, Payments: service, Keys: keys, Journal: journal,
		Idempotency: MustIdempotency(keys, time.Minute, idempotency.NewMetrics(reg), journal), Cards: cards,
	}).Routes(e)
	api := e.Group("/api/v1", handlers.APIKeyAuth(models.NewTenantStore(db)))
	(&handlers.CatalogAPI{Products: models.NewProductStore(db)}).Routes(api)
	srv := httptest.NewServer(e)
	tb.Cleanup(srv.Close)
	return srv
}

// testControlToken guards the control API of the tests' gateways, as GATEWAY_CONTROL_TOKEN
// guards a real one.
const testControlToken = "gwctl_handlers_test_token"

// MustGatewayClient starts a fake payment gateway (no webhooks, its control API guarded by
// testControlToken) and returns the shop's client for it, which sends the token.
func MustGatewayClient(tb testing.TB) *payments.GatewayClient {
	tb.Helper()
	gwDB, err := fakegateway.OpenDB(context.Background(), "", tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	gw, err := fakegateway.New(fakegateway.Config{DB: gwDB, ControlToken: testControlToken,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	tb.Cleanup(func() { srv.Close(); gw.Close(); models.Close(gwDB) })
	client := payments.NewGatewayClient(srv.URL, 5*time.Second)
	client.ControlToken = testControlToken
	return client
}

// noOutbox drops side effects: these tests are about what the browser sees.
type noOutbox struct{}

func (noOutbox) EnqueueSideEffectsTx(*gorm.DB, *models.Order) error { return nil }

// browser is one visitor: its own cookie jar (so its own session and CSRF cookie), and the
// CSRF token of the last page it fetched. It does not follow redirects, so tests see the 303.
type browser struct {
	base   string
	client *http.Client
	csrf   string
}

// MustBrowser returns a fresh visitor of srv.
func MustBrowser(tb testing.TB, srv *httptest.Server) *browser {
	tb.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		tb.Fatal(err)
	}
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &browser{base: srv.URL, client: client}
}

// MustGet fetches path, checks the status and returns the parsed page. It remembers the
// page's CSRF token (input[name=_csrf]) for later posts.
func (b *browser) MustGet(tb testing.TB, path string, wantStatus int) *goquery.Document {
	tb.Helper()
	resp, err := b.client.Get(b.base + path)
	if err != nil {
		tb.Fatalf("GET %s: %v", path, err)
	}
	return b.mustDoc(tb, "GET "+path, resp, wantStatus)
}

// MustGetResponse fetches path, checks the status and returns the response and its page.
func (b *browser) MustGetResponse(tb testing.TB, path string, wantStatus int) (*http.Response, *goquery.Document) {
	tb.Helper()
	resp, err := b.client.Get(b.base + path)
	if err != nil {
		tb.Fatalf("GET %s: %v", path, err)
	}
	return resp, b.mustDoc(tb, "GET "+path, resp, wantStatus)
}

// MustPost posts form (with the remembered CSRF token first, unless form sets _csrf) and
// checks the status. It returns the response, body already read into the document.
func (b *browser) MustPost(tb testing.TB, path string, form url.Values, wantStatus int, headers ...string) (*http.Response, *goquery.Document) {
	tb.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, set := form["_csrf"]; !set {
		form.Set("_csrf", b.csrf)
	}
	req, err := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := b.client.Do(req)
	if err != nil {
		tb.Fatalf("POST %s: %v", path, err)
	}
	return resp, b.mustDoc(tb, "POST "+path, resp, wantStatus)
}

func (b *browser) mustDoc(tb testing.TB, what string, resp *http.Response, wantStatus int) *goquery.Document {
	tb.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s: read body: %v", what, err)
	}
	if resp.StatusCode != wantStatus {
		tb.Fatalf("%s: got status %d, want %d; body:\n%.2000s", what, resp.StatusCode, wantStatus, body)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(string(body)))
	if err != nil {
		tb.Fatalf("%s: parse html: %v", what, err)
	}
	if tok, ok := doc.Find("input[name=_csrf]").First().Attr("value"); ok {
		b.csrf = tok
	}
	return doc
}

// MustLocation returns the path a redirect points to.
func MustLocation(tb testing.TB, resp *http.Response) string {
	tb.Helper()
	loc := resp.Header.Get("Location")
	if loc == "" {
		tb.Fatalf("got no Location header on a %d, want a redirect", resp.StatusCode)
	}
	return loc
}

// MustCount counts rows of model in db.
func MustCount(tb testing.TB, db *gorm.DB, model any) int64 {
	tb.Helper()
	var n int64
	if err := db.Model(model).Count(&n).Error; err != nil {
		tb.Fatalf("count: %v", err)
	}
	return n
}

// text returns the trimmed text of the selection.
func text(s *goquery.Selection) string { return strings.TrimSpace(s.Text()) }

// MustAdd puts quantity of sku into b's cart in tenant's shop through the add-to-cart form.
func (b *browser) MustAdd(tb testing.TB, tenant, sku string, quantity string) {
	tb.Helper()
	b.MustPost(tb, "/shop/"+tenant+"/cart/items", url.Values{"sku": {sku}, "quantity": {quantity}}, http.StatusSeeOther)
}

// checkoutValues is a valid checkout form as a customer would fill it in, taken from the
// rendered form so the hidden fields (idempotency_key, cart_id) come along.
func checkoutValues(doc *goquery.Document) url.Values {
	v := url.Values{}
	doc.Find("form#checkout-form input[type=hidden]").Each(func(_ int, s *goquery.Selection) {
		v.Set(s.AttrOr("name", ""), s.AttrOr("value", ""))
	})
	v.Set("email", "ada@example.com")
	v.Set("name", "Ada Lovelace")
	v.Set("address", "1 Analytical Way")
	v.Set("city", "London")
	v.Set("postal_code", "N1 9GU")
	v.Set("country", "GB")
	v.Set("shipping_method", "express")
	v.Set("card_number", "4242 4242 4242 4242")
	return v
}

// formValues returns the named inputs of a form selection with their rendered values.
func formValues(form *goquery.Selection) url.Values {
	v := url.Values{}
	form.Find("input[name]").Each(func(_ int, s *goquery.Selection) {
		v.Set(s.AttrOr("name", ""), s.AttrOr("value", ""))
	})
	return v
}
