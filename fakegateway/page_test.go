package fakegateway_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"checkoutlab/fakegateway"
)

// browser is an operator with the gateway's page open: a cookie jar holding the page's
// session (logged in with the control token when the gateway has one) and the CSRF token of
// the page it loaded last. It never follows redirects, so tests see them.
type browser struct {
	g      *testGateway
	client *http.Client
	csrf   string
}

var csrfInput = regexp.MustCompile(`name="_csrf" value="([^"]*)"`)

func newBrowser(tb testing.TB, g *testGateway) *browser {
	tb.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return &browser{g: g, client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// get fetches path and returns the status and body, without failing on the status.
func (b *browser) get(t *testing.T, path string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.g.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// login opens /?token=… once, as the link cmd/fakegateway logs; without a control token it
// does nothing.
func (b *browser) login(t *testing.T) {
	t.Helper()
	if b.g.token == "" {
		return
	}
	if status, body := b.get(t, "/?token="+b.g.token); status != http.StatusSeeOther {
		t.Fatalf("login: got %d %s, want 303", status, body)
	}
}

// page loads path (logging in first if needed), fails unless it is 200, and keeps the CSRF
// token of its forms.
func (b *browser) page(t *testing.T, path string) string {
	t.Helper()
	status, body := b.get(t, path)
	if status == http.StatusUnauthorized {
		b.login(t)
		status, body = b.get(t, path)
	}
	if status != http.StatusOK {
		t.Fatalf("GET %s: got %d", path, status)
	}
	if m := csrfInput.FindStringSubmatch(body); m != nil {
		b.csrf = m[1]
	}
	return body
}

// postForm posts a form of the page, with the CSRF token of the page unless form sets _csrf,
// and returns the answer without following its redirect.
func (b *browser) postForm(t *testing.T, path string, form url.Values, header ...string) *http.Response {
	t.Helper()
	if b.csrf == "" {
		b.page(t, "/")
	}
	if _, ok := form["_csrf"]; !ok {
		form.Set("_csrf", b.csrf)
	}
	req, err := http.NewRequest(http.MethodPost, b.g.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func (g *testGateway) postForm(t *testing.T, path string, form url.Values) *http.Response {
	t.Helper()
	return g.browser.postForm(t, path, form)
}

func (g *testGateway) page(t *testing.T, path string) string {
	t.Helper()
	return g.browser.page(t, path)
}

func TestPage(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		g := mustGateway(t, dialect)

		t.Run("AFormPerFault", func(t *testing.T) {
			page := g.page(t, "/")
			for _, name := range []string{"latency", "error_before_commit", "timeout_before_commit", "commit_then_drop",
				"commit_then_delay", "commit_then_error", "decline", "webhook_duplicate", "webhook_reorder",
				"webhook_delay", "webhook_fail", "ignore_idempotency_key"} {
				if !strings.Contains(page, `data-testid="fault-form-`+name+`"`) {
					t.Errorf("no form for %s", name)
				}
			}
		})
		t.Run("ArmAndDisarmByForm", func(t *testing.T) {
			resp := g.postForm(t, "/_control/faults", url.Values{"fault": {"webhook_duplicate"}, "times": {"2"}, "copies": {"4"}, "probability": {"1.0"}, "seed": {""}})
			loc := resp.Header.Get("Location")
			if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/?armed=") {
				t.Fatalf("got %d to %q, want 303 to /?armed=<id>", resp.StatusCode, loc)
			}
			if notice := text(mustDoc(t, g.page(t, loc)).Find(`[data-testid="gateway-notice"]`)); !strings.Contains(notice, "Armed webhook_duplicate") ||
				!strings.Contains(notice, "the next 2 requests") {
				t.Errorf("confirmation: got %q, want it to name webhook_duplicate and its 2 strikes", notice)
			}
			var list fakegateway.FaultList
			g.mustDo(t, http.MethodGet, "/_control/faults", nil, nil).decode(t, &list)
			if len(list.Faults) != 1 || list.Faults[0].Copies != 4 || list.Faults[0].Remaining != 2 {
				t.Fatalf("got %+v, want webhook_duplicate with copies 4, 2 remaining", list.Faults)
			}
			if !strings.Contains(g.page(t, "/?partial=live"), `data-testid="armed-fault"`) {
				t.Error("armed fault not listed on the page")
			}
			resp = g.postForm(t, "/_control/faults/disarm", url.Values{})
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/?disarmed=all" {
				t.Fatalf("disarm: got %d to %q, want 303 to /?disarmed=all", resp.StatusCode, resp.Header.Get("Location"))
			}
			g.mustDo(t, http.MethodGet, "/_control/faults", nil, nil).decode(t, &list)
			if len(list.Faults) != 0 {
				t.Errorf("got %d faults after disarm, want 0", len(list.Faults))
			}
		})
		t.Run("BadFormShowsError", func(t *testing.T) {
			resp := g.postForm(t, "/_control/faults", url.Values{"fault": {"latency"}, "delay_ms": {"soon"}})
			loc := resp.Header.Get("Location")
			if resp.StatusCode != http.StatusSeeOther || loc != "/?error=invalid_request" {
				t.Fatalf("got %d to %q, want 303 to /?error=invalid_request", resp.StatusCode, loc)
			}
			if page := g.page(t, loc); !strings.Contains(page, `data-testid="gateway-error"`) ||
				!strings.Contains(page, "The fault was not armed") {
				t.Error("page does not show the error")
			}
			var list fakegateway.FaultList
			g.mustDo(t, http.MethodGet, "/_control/faults", nil, nil).decode(t, &list)
			if len(list.Faults) != 0 {
				t.Errorf("got %d faults after a bad form, want 0", len(list.Faults))
			}
		})
		t.Run("DoubleChargeFlagged", func(t *testing.T) {
			body := chargeBody(1200, cardOK, "ord_twice")
			g.mustDo(t, http.MethodPost, "/v1/charges", body, key("twice-1"))
			if strings.Contains(g.page(t, "/"), `data-testid="double-charged"`) {
				t.Fatal("one charge flagged as a double charge")
			}
			g.mustDo(t, http.MethodPost, "/v1/charges", body, key("twice-2"))
			live := g.page(t, "/?partial=live")
			if !strings.Contains(live, `data-testid="double-charged"`) || !strings.Contains(live, `class="double"`) {
				t.Error("order charged twice is not flagged")
			}
			if strings.Contains(live, "<html") {
				t.Error("partial renders the whole page")
			}
		})
		t.Run("ResendByForm", func(t *testing.T) {
			ch := g.mustCharge(t, "page-resend", cardOK)
			ev := g.hooks.forCharge(t, ch.ID, 2)[0]
			resp := g.postForm(t, "/_control/events/"+ev.ID+"/resend", url.Values{})
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("got %d, want 303", resp.StatusCode)
			}
			g.hooks.forCharge(t, ch.ID, 3)
			if !strings.Contains(g.page(t, "/"), `data-testid="resend"`) {
				t.Error("no resend button on the page")
			}
		})
		t.Run("InputsLabelled", func(t *testing.T) {
			doc := mustDoc(t, g.page(t, "/"))
			fields := doc.Find(`[data-testid="fault-panel"] form input:not([type=hidden]), [data-testid="fault-panel"] form select`)
			if fields.Length() == 0 {
				t.Fatal("no fields in the fault panel")
			}
			ids := map[string]bool{}
			fields.Each(func(_ int, f *goquery.Selection) {
				id := f.AttrOr("id", "")
				if id == "" || ids[id] {
					t.Errorf("field %s of %s: got id %q, want a unique id", f.AttrOr("name", ""), f.Closest("form").AttrOr("data-testid", ""), id)
				}
				ids[id] = true
				if label := doc.Find(`label[for="` + id + `"]`); strings.TrimSpace(label.Text()) == "" {
					t.Errorf("field %s: got no label, want one", id)
				}
			})
		})
		t.Run("PerFaultDisarm", func(t *testing.T) {
			var a, b fakegateway.Fault
			g.mustDo(t, http.MethodPost, "/_control/faults", map[string]any{"fault": "latency", "delay_ms": 0, "times": 5}, nil).decode(t, &a)
			g.mustDo(t, http.MethodPost, "/_control/faults", map[string]any{"fault": "webhook_reorder"}, nil).decode(t, &b)
			resp := g.postForm(t, "/_control/faults/"+strconv.FormatInt(a.ID, 10)+"/disarm", url.Values{})
			if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/?disarmed="+strconv.FormatInt(a.ID, 10) {
				t.Fatalf("disarm one: got %d to %q, want 303 to /?disarmed=%d", resp.StatusCode, loc, a.ID)
			}
			var list fakegateway.FaultList
			g.mustDo(t, http.MethodGet, "/_control/faults", nil, nil).decode(t, &list)
			if len(list.Faults) != 1 || list.Faults[0].ID != b.ID {
				t.Fatalf("armed after disarming #%d: got %+v, want only #%d", a.ID, list.Faults, b.ID)
			}
			doc := mustDoc(t, g.page(t, "/?partial=live"))
			if doc.Find(`[data-testid="spent-fault"][data-fault="latency"]`).Length() == 0 {
				t.Error("the disarmed fault is not in the fault history")
			}
			if doc.Find(`[data-testid="armed-fault"][data-fault="webhook_reorder"] [data-testid="disarm"]`).Length() != 1 {
				t.Error("the armed fault has no disarm button of its own")
			}
			if r := g.mustDo(t, http.MethodDelete, "/_control/faults/"+strconv.FormatInt(b.ID, 10), nil, nil); r.Status != http.StatusOK {
				t.Errorf("DELETE /_control/faults/%d: got %d, want 200", b.ID, r.Status)
			}
			if r := g.mustDo(t, http.MethodDelete, "/_control/faults/999999", nil, nil); r.Status != http.StatusNotFound {
				t.Errorf("DELETE of an unknown fault: got %d, want 404", r.Status)
			}
			g.mustDo(t, http.MethodGet, "/_control/faults", nil, nil).decode(t, &list)
			if len(list.Faults) != 0 {
				t.Errorf("armed after disarming both: got %+v, want none", list.Faults)
			}
		})
		t.Run("StruckChargeMarked", func(t *testing.T) {
			g.mustArm(t, map[string]any{"fault": "decline", "code": "insufficient_funds"})
			r := g.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(700, cardOK, "ord_struck"), key("struck-1"))
			var ch fakegateway.Charge
			r.decode(t, &ch)
			// Before the commit: the first attempt fails, the retry under the same key charges.
			g.mustArm(t, map[string]any{"fault": "error_before_commit"})
			if r := g.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(800, cardOK, "ord_retried"), key("struck-2")); r.Status != http.StatusServiceUnavailable {
				t.Fatalf("error_before_commit: got %d, want 503", r.Status)
			}
			var retried fakegateway.Charge
			g.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(800, cardOK, "ord_retried"), key("struck-2")).decode(t, &retried)

			doc := mustDoc(t, g.page(t, "/?partial=live"))
			if got := text(doc.Find(`[data-testid="ledger-row"][data-charge-id="` + ch.ID + `"] [data-testid="struck-by"]`)); got != "decline" {
				t.Errorf("declined charge: got struck by %q, want decline", got)
			}
			if got := text(doc.Find(`[data-testid="ledger-row"][data-charge-id="` + retried.ID + `"] [data-testid="struck-by"]`)); got != "earlier attempt: error_before_commit" {
				t.Errorf("retried charge: got struck by %q, want the earlier attempt's error_before_commit", got)
			}
			spent := doc.Find(`[data-testid="spent-fault"][data-fault="decline"]`)
			if !strings.Contains(spent.Text(), ch.ID) || !strings.Contains(spent.Text(), "ord_struck") {
				t.Errorf("fault history: got %q, want the spent decline with its charge %s and order", strings.Join(strings.Fields(spent.Text()), " "), ch.ID)
			}
			if link := doc.Find(`[data-testid="ledger-row"][data-charge-id="`+ch.ID+`"] [data-testid="order-link"]`).AttrOr("href", ""); !strings.HasSuffix(link, "/orders/ord_struck") || !strings.HasPrefix(link, "http://127.0.0.1:") {
				t.Errorf("order link: got %q, want the shop's /orders/ord_struck", link)
			}
			if card := text(mustDoc(t, g.page(t, "/")).Find(`[data-testid="shop-link"]`)); card == "" {
				t.Error("no link back to the shop in the header")
			}
		})
		t.Run("TestCardStrikeMarked", func(t *testing.T) {
			r := g.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(900, "4000000000000770", "ord_dupes"), key("card-dupes"))
			var ch fakegateway.Charge
			r.decode(t, &ch)
			doc := mustDoc(t, g.page(t, "/?partial=live"))
			if got := text(doc.Find(`[data-testid="ledger-row"][data-charge-id="` + ch.ID + `"] [data-testid="struck-by"]`)); got != "card: webhook_duplicate" {
				t.Errorf("charge of the webhook_duplicate card: got struck by %q, want card: webhook_duplicate", got)
			}
		})
	})
}

func mustDoc(tb testing.TB, html string) *goquery.Document {
	tb.Helper()
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(html))
	if err != nil {
		tb.Fatal(err)
	}
	return doc
}

// text is the selection's text with white space collapsed.
func text(s *goquery.Selection) string { return strings.Join(strings.Fields(s.Text()), " ") }
