package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/chromedp/chromedp"

	"checkoutlab/models"
	"checkoutlab/payments/lab"
)

// TestLabPage runs the lost-response scenario and a crash scenario from the browser against
// the real program: with the protection off the double charge is reproduced, with it on it is
// prevented, and each result page draws the run's journal.
func TestLabPage(t *testing.T) {
	st := MustStartShop(t, models.SQLite, fastEnv)
	client := operatorClient(t, st)
	page := func(res *http.Response, err error) *goquery.Document {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: got %d, want 200", res.Request.Method, res.Request.URL, res.StatusCode)
		}
		doc, err := goquery.NewDocumentFromReader(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	cat := page(client.Get(st.Shop + "/lab"))
	card := cat.Find(`[data-testid="lab-scenario"][data-scenario="lost_response"]`)
	if card.Length() != 1 {
		t.Fatal("the catalogue has no lost_response scenario")
	}
	csrf := card.Find(`input[name=_csrf]`).First().AttrOr("value", "")
	if cat.Find(`[data-testid="lab-scenario"]`).Length() != len(lab.Scenarios) || csrf == "" {
		t.Fatalf("got %d scenarios and csrf %q, want every scenario and a token", cat.Find(`[data-testid="lab-scenario"]`).Length(), csrf)
	}
	// A crash scenario from the browser: the shop runs the lab's shop as its own child process.
	for _, tc := range []struct{ scenario, mode, verdict, shows string }{
		{"lost_response", "unprotected", "reproduced", "payment_outcome_unknown"},
		{"lost_response", "protected", "prevented", "found the charge"},
		{"crash_after_gateway_charge", "unprotected", "reproduced", "SIGKILL"},
		{"crash_after_gateway_charge", "protected", "prevented", "SIGKILL"},
	} {
		doc := page(client.PostForm(st.Shop+"/lab/"+tc.scenario+"/run", url.Values{"_csrf": {csrf}, "mode": {tc.mode}}))
		verdict := doc.Find(`[data-testid="lab-verdict"]`)
		if !strings.HasPrefix(verdict.Text(), tc.verdict) || verdict.AttrOr("data-ok", "") != "true" {
			t.Errorf("%s %s: got verdict %q, want %q…", tc.scenario, tc.mode, verdict.Text(), tc.verdict)
		}
		if n := doc.Find(`svg [data-testid="lab-timeline-event"]`).Length(); n == 0 {
			t.Errorf("%s %s: the timeline has no event", tc.scenario, tc.mode)
		}
		if n := doc.Find(`[data-testid="lab-check"]`).Length(); n == 0 {
			t.Errorf("%s %s: no invariant rows", tc.scenario, tc.mode)
		}
		if !strings.Contains(doc.Text(), tc.shows) {
			t.Errorf("%s %s: the result page does not show %q", tc.scenario, tc.mode, tc.shows)
		}
		if tok := doc.Find(`input[name=_csrf]`).First().AttrOr("value", ""); tok != "" {
			csrf = tok
		}
	}
}

// TestBrowserLab clicks the lab's buttons in Chromium: with JavaScript the form is boosted by
// htmx and says "Running…" until the result page replaces it (its URL pushed); without, it is
// a plain POST and redirect.
func TestBrowserLab(t *testing.T) {
	browser := MustBrowser(t)
	st := MustStartShop(t, models.SQLite, fastEnv)
	card := `[data-testid="lab-scenario"][data-scenario="lost_response"] `
	for _, tc := range []struct {
		noJS          bool
		mode, verdict string
	}{{false, "unprotected", "reproduced"}, {true, "protected", "prevented"}} {
		p := MustTab(t, browser, st, tc.noJS)
		p.LoginOperator()
		button := chromedp.CSS(card + `form[data-mode="` + tc.mode + `"] button`)
		p.Do("open the lab", 20*time.Second, chromedp.Navigate(p.url("/lab")), chromedp.WaitVisible(button))
		p.Do("run "+tc.mode, 10*time.Second, chromedp.Click(button))
		if !tc.noJS {
			p.Do("running", 5*time.Second, chromedp.WaitVisible(chromedp.CSS(card+`form[data-mode="`+tc.mode+`"] .lab-running`)))
		}
		p.Do("verdict", 60*time.Second, chromedp.WaitVisible(sel("lab-verdict")), chromedp.WaitVisible(sel("lab-timeline-event")))
		if v := Eval[string](p, `document.querySelector('[data-testid="lab-verdict"]').textContent`); !strings.HasPrefix(v, tc.verdict) {
			t.Errorf("%s: got verdict %q, want %q…", tc.mode, v, tc.verdict)
		}
		if loc := Eval[string](p, `location.pathname`); !strings.HasPrefix(loc, "/lab/runs/") {
			t.Errorf("%s: got location %q, want /lab/runs/…", tc.mode, loc)
		}
	}
}
