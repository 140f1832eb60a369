package handlers_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/labstack/echo/v4"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// hostile are the texts the red team found trouble with, and their neighbours.
var hostile = []string{
	"", "\x00", "ada\x00@example.com", "\xff", "Ad\xc3\x28a", `\u0000`, `ada\u0000`, `"`, `\`, `"}`, "%00", "%ff",
	strings.Repeat("é", 300), "😀", "\u202e", "<script>alert(1)</script>", "'; DROP TABLE orders; --",
	"\r\nSet-Cookie: x=1", "\t", "-1", "1e99", "99999999999999999999", "camp-mug", "4242424242424242",
}

// fuzzTargets is how many kinds of request FuzzRequests makes (see fuzzRequest).
const fuzzTargets = 11

// FuzzRequests sends hostile text — in JSON fields, form fields, paths, query parameters and
// headers — to the API, the storefront's forms, the operator login and the webhook endpoint,
// on both databases, and fails on any 5xx: bad input is the client's problem (4xx), never the
// shop's. `go test` runs the seeds as a unit test; `go test -fuzz FuzzRequests ./handlers/`
// keeps exploring.
func FuzzRequests(f *testing.F) {
	for target := 0; target < fuzzTargets; target++ {
		for i, s := range hostile {
			f.Add(uint8(target), s, hostile[(i+5)%len(hostile)])
		}
	}
	shops := fuzzShops(f)
	f.Fuzz(func(t *testing.T, target uint8, a, b string) {
		for _, s := range shops {
			resp, body, ok := fuzzRequest(t, s, int(target)%fuzzTargets, a, b)
			if ok && resp.StatusCode >= 500 {
				t.Fatalf("%s: target %d, a=%q, b=%q: got %d %.300s", s.dialect, target%fuzzTargets, a, b, resp.StatusCode, body)
			}
		}
	})
}

// fuzzShop is one shop under fuzzing and a browser with a session on it.
type fuzzShop struct {
	*secureShop
	dialect string
	b       *browser
}

// fuzzShops starts a shop on SQLite and, when it is reachable, on PostgreSQL (under CI it
// must be). It does not skip the fuzz target without PostgreSQL: SQLite alone is still worth it.
func fuzzShops(f *testing.F) []fuzzShop {
	dialects := []string{models.SQLite}
	if postgresReachable() {
		dialects = append(dialects, models.Postgres)
	} else if modelstest.InCI() {
		f.Fatal("PostgreSQL is not reachable at TEST_DATABASE_URL (CI is set, so this may not skip)")
	} else {
		f.Log("PostgreSQL is not reachable: fuzzing SQLite only")
	}
	var shops []fuzzShop
	for _, d := range dialects {
		s := MustSecureShop(f, modelstest.MustOpen(f, d), false)
		b := MustBrowser(f, s.srv)
		b.MustGet(f, "/shop/acme", http.StatusOK)
		shops = append(shops, fuzzShop{secureShop: s, dialect: d, b: b})
	}
	return shops
}

func postgresReachable() bool {
	u := os.Getenv("TEST_DATABASE_URL")
	if u == "" {
		u = modelstest.DefaultAdminURL
	}
	db, err := sql.Open("pgx", u)
	if err != nil {
		return false
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return db.PingContext(ctx) == nil
}

// faultCards make the fake gateway fail on purpose, and a 5xx is then the honest answer
// (the outcome is unknown, or the gateway is down): the fuzzer pays with a good card instead.
var faultCards = []string{"4000000000000119", "4000000000000259", "4000000000000341"}

func card(s string) string {
	for _, c := range faultCards {
		if strings.ReplaceAll(strings.TrimSpace(s), " ", "") == c {
			return "4242424242424242"
		}
	}
	return s
}

func quoted(s string) string { b, _ := json.Marshal(s); return string(b) }

// fuzzRequest makes request number target with the texts a and b, and returns the answer. ok
// is false when the request cannot be sent at all (the client refuses the header value).
func fuzzRequest(t *testing.T, s fuzzShop, target int, a, b string) (*http.Response, string, bool) {
	base, key := s.srv.URL, models.NewID("fuzz")
	api := func(method, path, body string, headers ...string) *http.Request {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer sk_test_acme")
		req.Header.Set("Content-Type", echo.MIMEApplicationJSON)
		req.Header.Set("Idempotency-Key", key)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		return req
	}
	order := func(email, name, sku, quantity string) string {
		return `{"items":[{"sku":` + sku + `,"quantity":` + quantity + `}],"email":` + email + `,"shipping_address":{"name":` + name +
			`,"address":"1 Analytical Way","city":"London","postal_code":"N1 9GU","country":"GB"}`
	}
	var req *http.Request
	switch target {
	case 0: // API order, the texts pasted into the JSON as they are
		req = api(http.MethodPost, "/api/v1/orders", order(`"`+a+`"`, `"`+b+`"`, `"camp-mug"`, "1")+"}")
	case 1: // API order, the texts as JSON strings
		req = api(http.MethodPost, "/api/v1/orders", order(quoted(a), quoted(b), quoted(a), "1")+"}")
	case 2: // API checkout: any SKU and card
		req = api(http.MethodPost, "/api/v1/checkout", order(`"ada@example.com"`, `"Ada"`, quoted(a), "1")+`,"card_number":`+quoted(card(b))+"}")
	case 3: // API payment of any order, any amount
		req = api(http.MethodPost, "/api/v1/payments", `{"order_id":`+quoted(a)+`,"amount":`+b+`,"currency":"USD","card_number":"4242424242424242"}`)
	case 4: // API paths and queries
		req = api(http.MethodGet, "/api/v1/orders/"+url.PathEscape(a)+"?limit="+url.QueryEscape(b), "")
	case 5: // the storefront's checkout form
		return s.checkout(t, a, b)
	case 6: // the add-to-cart form
		return s.b.post(t, "/shop/acme/cart/items", url.Values{"sku": {a}, "quantity": {b}})
	case 7: // storefront paths and queries
		req = api(http.MethodGet, "/shop/"+url.PathEscape(a)+"/products/"+url.PathEscape(b)+"?notice="+url.QueryEscape(a), "")
	case 8: // the order page and its link signature
		req = api(http.MethodGet, "/orders/"+url.PathEscape(a)+"?sig="+url.QueryEscape(b)+"&journal="+url.QueryEscape(b), "")
	case 9: // the operator login
		return s.b.post(t, "/ops/login", url.Values{"password": {a}, "next": {b}})
	case 10: // a webhook with any body and headers, and an idempotency key of any bytes
		req = api(http.MethodPost, "/webhooks/gateway", a, "webhook-id", b, "webhook-timestamp", b, "webhook-signature", "v1,"+b)
		if r := api(http.MethodPost, "/api/v1/orders", order(`"ada@example.com"`, `"Ada"`, `"camp-mug"`, "1")+"}", "Idempotency-Key", a); a != "" {
			if resp, body, ok := send(s.b.client, r); ok && resp.StatusCode >= 500 {
				return resp, body, ok
			}
		}
	}
	return send(noRedirects(), req)
}

func send(client *http.Client, req *http.Request) (*http.Response, string, bool) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", false // e.g. a header value Go's client will not send
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body), true
}

// post sends a form as the browser, with its CSRF token, without failing on the status.
func (b *browser) post(t *testing.T, path string, form url.Values) (*http.Response, string, bool) {
	form.Set("_csrf", b.csrf)
	req, err := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", echo.MIMEApplicationForm)
	return send(b.client, req)
}

// checkout puts a mug in the cart and sends the checkout form with a and b in its fields.
func (s fuzzShop) checkout(t *testing.T, a, b string) (*http.Response, string, bool) {
	if resp, body, ok := s.b.post(t, "/shop/acme/cart/items", url.Values{"sku": {"camp-mug"}, "quantity": {"1"}}); !ok || resp.StatusCode >= 500 {
		return resp, body, ok
	}
	resp, err := s.b.client.Get(s.b.base + "/shop/acme/checkout")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 500 {
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body), true
	}
	doc, err := goquery.NewDocumentFromReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	form := checkoutValues(doc)
	if tok, ok := doc.Find("input[name=_csrf]").First().Attr("value"); ok {
		s.b.csrf = tok
	}
	form.Set("name", a)
	form.Set("city", b)
	form.Set("email", b)
	form.Set("postal_code", a)
	form.Set("card_number", card(a))
	if form.Get("idempotency_key") == "" {
		form.Set("idempotency_key", fmt.Sprint(time.Now().UnixNano()))
	}
	return s.b.post(t, "/shop/acme/checkout", form)
}
