package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"checkoutlab/models"
	"checkoutlab/payments/lab"
)

// labClient is a browser without JavaScript on the lab's pages: a cookie jar (the session
// and its CSRF token) and a goquery document per page.
type labClient struct {
	tb   testing.TB
	shop string
	http *http.Client
	csrf string
}

// newLabClient is logged in as an operator, as a person is: it opens the one-click login link
// the shop logs (the lab is an operator tool).
func newLabClient(tb testing.TB, st Stack) *labClient {
	tb.Helper()
	jar, _ := cookiejar.New(nil)
	c := &labClient{tb: tb, shop: st.Shop, http: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	res, err := c.http.Get(st.LoginURL)
	if err != nil {
		tb.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		tb.Fatalf("operator login: got %d, want 303 to the lab", res.StatusCode)
	}
	return c
}

// get fetches path and wants status.
func (c *labClient) get(path string, status int) *goquery.Document {
	c.tb.Helper()
	res, err := c.http.Get(c.shop + path)
	if err != nil {
		c.tb.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != status {
		c.tb.Fatalf("GET %s: got %d, want %d", path, res.StatusCode, status)
	}
	doc, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		c.tb.Fatal(err)
	}
	if tok := doc.Find(`input[name=_csrf]`).First().AttrOr("value", ""); tok != "" {
		c.csrf = tok
	}
	return doc
}

// start posts a run and returns the run page's path it is sent to, or the status and page of
// a refusal.
func (c *labClient) start(scenario, mode string) (string, int, *goquery.Document) {
	c.tb.Helper()
	res, err := c.http.PostForm(c.shop+"/lab/"+scenario+"/run", url.Values{"_csrf": {c.csrf}, "mode": {mode}})
	if err != nil {
		c.tb.Fatal(err)
	}
	defer res.Body.Close()
	doc, _ := goquery.NewDocumentFromReader(res.Body)
	return res.Header.Get("Location"), res.StatusCode, doc
}

// result waits for the run at path to end and returns its page.
func (c *labClient) result(path string) *goquery.Document {
	c.tb.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		doc := c.get(path, http.StatusOK)
		if doc.Find(`[data-testid="lab-running"]`).Length() == 0 {
			return doc
		}
		time.Sleep(300 * time.Millisecond)
	}
	c.tb.Fatalf("%s: the run did not end within 2 minutes", path)
	return nil
}

// runJSON is GET path.json.
func (c *labClient) runJSON(path string) lab.Result {
	c.tb.Helper()
	res, err := c.http.Get(c.shop + path + ".json")
	if err != nil {
		c.tb.Fatal(err)
	}
	defer res.Body.Close()
	var r lab.Result
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil || res.StatusCode != http.StatusOK {
		c.tb.Fatalf("GET %s.json: %d, %v", path, res.StatusCode, err)
	}
	return r
}

// TestLabRunsSurviveRestart: a run started from /lab is kept in the shop's own database: after
// the shop restarts, its page, its listing and its exports still answer.
func TestLabRunsSurviveRestart(t *testing.T) {
	files := map[string]string{"DATA_DIR": t.TempDir()} // one SQLite database for both shops
	st := MustStartShop(t, models.SQLite, withEnv(fastEnv, files))
	c := newLabClient(t, st)
	c.get("/lab", http.StatusOK)
	path, status, _ := c.start("lost_response", "unprotected")
	if status != http.StatusSeeOther || !strings.HasPrefix(path, "/lab/runs/labrun_") {
		t.Fatalf("got %d to %q, want 303 to /lab/runs/labrun_…", status, path)
	}
	before := c.result(path).Find(`[data-testid="lab-verdict"]`).AttrOr("data-outcome", "")
	if err := st.Stop(); err != nil {
		t.Fatalf("stop the shop: %v", err)
	}

	st = MustStartShop(t, models.SQLite, withEnv(fastEnv, files))
	c = newLabClient(t, st)
	doc := c.get(path, http.StatusOK)
	if got := doc.Find(`[data-testid="lab-verdict"]`).AttrOr("data-outcome", ""); got != "double_charge" || got != before {
		t.Errorf("after a restart: got outcome %q, want double_charge as before (%q)", got, before)
	}
	if c.get("/lab/runs", http.StatusOK).Find(`[data-testid="lab-run"] a[href="`+path+`"]`).Length() != 1 {
		t.Errorf("/lab/runs does not list %s after a restart", path)
	}
	if r := c.runJSON(path); r.ID != strings.TrimPrefix(path, "/lab/runs/") || len(r.Ledger) != 2 || r.Seed == 0 || len(r.Settings) == 0 {
		t.Errorf("got %s with %d charges, seed %d, %d settings; want the run, its two charges, its seed and settings", r.ID, len(r.Ledger), r.Seed, len(r.Settings))
	}
	for _, p := range []string{"/ledger", "/deliveries", "/reconciliation"} {
		c.get(path+p, http.StatusOK)
	}
	rec := c.get(path+"/reconciliation", http.StatusOK)
	if rec.Find(`[data-testid="lab-reconciliation-line"][data-holds="false"]`).Length() == 0 {
		t.Errorf("the run's reconciliation finds nothing wrong, want its double charge (the run's own report, not the shop's)")
	}
}

// labArrow is an arrow as the page draws it.
type labArrow struct {
	From, To, Kind string
	Message        int
}

// mustArrowsAreMessages checks that every arrow of the run page in p joins the sender and the
// receiver of one recorded message, and that every response goes back along its request.
func mustArrowsAreMessages(t *testing.T, p *Page, r lab.Result) {
	t.Helper()
	arrows := Eval[[]labArrow](p, `[...document.querySelectorAll('[data-testid="lab-arrow"]')].map(a => ({
		from: a.dataset.from, to: a.dataset.to, kind: a.dataset.kind, message: Number(a.dataset.message)}))`)
	if len(arrows) != len(r.Messages) || len(arrows) == 0 {
		t.Errorf("%s %s: got %d arrows, want one per recorded message (%d)", r.Scenario, r.Mode, len(arrows), len(r.Messages))
	}
	lanes := map[string]bool{}
	for _, l := range lab.Lanes {
		lanes[l] = true
	}
	for _, a := range arrows {
		if a.Message < 0 || a.Message >= len(r.Messages) {
			t.Errorf("an arrow %+v draws no recorded message", a)
			continue
		}
		m := r.Messages[a.Message]
		if a.From != m.From || a.To != m.To || a.Kind != m.Kind || !lanes[m.From] || !lanes[m.To] || m.From == m.To {
			t.Errorf("arrow %+v: got %s → %s (%s), want the message's %s → %s (%s) between two lanes", a, a.From, a.To, a.Kind, m.From, m.To, m.Kind)
		}
		if m.Kind == lab.MessageResponse {
			if m.Answers < 0 || m.Answers >= len(r.Messages) {
				t.Errorf("response %+v answers no request", m)
				continue
			}
			if q := r.Messages[m.Answers]; q.From != m.To || q.To != m.From || q.Kind != lab.MessageRequest {
				t.Errorf("response %s → %s (%s) answers %s → %s (%s), want it back along its request", m.From, m.To, m.Label, q.From, q.To, q.Label)
			}
		}
	}
}

// TestBrowserLab runs the lab in Chromium as a trainer would at 1024×768: lost_response with
// protection off (charged twice, the overcharge equal to the purchase) and on (charged once),
// every arrow a recorded message; crash_after_gateway_charge off, whose killed shop's first
// charge still shows; a second run refused while one is going, with every button disabled;
// and presenter mode's keys. Set CHECKOUTLAB_SCREENSHOTS to keep the pictures.
func TestBrowserLab(t *testing.T) {
	browser := MustBrowser(t)
	st := MustStartShop(t, models.SQLite, fastEnv)
	p := MustTab(t, browser, st, false)
	p.LoginOperator()
	p.Do("projector viewport", 5*time.Second, chromedp.EmulateViewport(1024, 768))
	c := newLabClient(t, st)
	card := func(s string) string { return `[data-testid="lab-scenario"][data-scenario="` + s + `"] ` }
	run := func(scenario, mode string) lab.Result {
		t.Helper()
		button := chromedp.CSS(card(scenario) + `form[data-mode="` + mode + `"] button`)
		p.Do("open the lab", 20*time.Second, chromedp.Navigate(p.url("/lab")), chromedp.WaitVisible(button))
		p.Do("run "+scenario+" "+mode, 90*time.Second, chromedp.Click(button), chromedp.WaitVisible(sel("lab-verdict")))
		loc := Eval[string](p, `location.pathname`)
		if !strings.HasPrefix(loc, "/lab/runs/labrun_") {
			t.Fatalf("got location %q, want /lab/runs/labrun_…", loc)
		}
		return c.runJSON(loc)
	}
	verdict := func() map[string]string {
		return Eval[map[string]string](p, `(() => { const v = document.querySelector('[data-testid="lab-verdict"]');
			return {outcome: v.dataset.outcome, overcharge: v.dataset.overcharge, currency: v.dataset.currency, text: v.textContent,
				harm: String(v.classList.contains("lab-verdict-harm"))}; })()`)
	}

	off := run("lost_response", "unprotected")
	v := verdict()
	if len(off.Ledger) != 2 {
		t.Fatalf("lost_response off: got %d charges in the run's ledger, want 2", len(off.Ledger))
	}
	purchase := off.Ledger[0].Amount
	if v["outcome"] != "double_charge" || v["overcharge"] != strconv.FormatInt(purchase, 10) || v["currency"] != "USD" || v["harm"] != "true" ||
		!strings.Contains(v["text"], "Charged twice") || !strings.Contains(v["text"], "expected with protection off") {
		t.Errorf("lost_response off: got verdict %v, want double_charge, an overcharge of the purchase (%d), drawn as harm", v, purchase)
	}
	mustArrowsAreMessages(t, p, off)
	if n := Eval[int](p, `document.querySelectorAll('[data-testid="lab-event"][data-kind="charge"][data-decisive="true"]').length`); n != 1 {
		t.Errorf("lost_response off: got %d decisive charges, want the second one", n)
	}
	screenshot(t, p, "lab-run-1024.png")

	on := run("lost_response", "protected")
	v = verdict()
	if v["outcome"] != "clean" || v["overcharge"] != "0" || v["harm"] != "false" || !strings.Contains(v["text"], "Charged once") {
		t.Errorf("lost_response on: got verdict %v, want clean, charged once", v)
	}
	mustArrowsAreMessages(t, p, on)
	p.Do("phone viewport", 5*time.Second, chromedp.EmulateViewport(390, 844))
	mustFit(t, p, "lab run")
	screenshot(t, p, "lab-run-390.png")
	p.Do("projector viewport", 5*time.Second, chromedp.EmulateViewport(1024, 768))

	// The crash run: while it goes, a second run is refused and every button is disabled.
	button := chromedp.CSS(card("crash_after_gateway_charge") + `form[data-mode="unprotected"] button`)
	p.Do("open the lab", 20*time.Second, chromedp.Navigate(p.url("/lab")), chromedp.WaitVisible(button))
	p.Do("run the crash", 20*time.Second, chromedp.Click(button), chromedp.WaitVisible(sel("lab-running")))
	c.get("/lab", http.StatusOK)
	if _, status, doc := c.start("double_click", "protected"); status != http.StatusConflict || doc.Find(`[data-testid="lab-busy"]`).Length() != 1 {
		t.Errorf("a second run during a run: got %d, want 409 with lab-busy", status)
	}
	if n, all := Eval[int](p, `document.querySelectorAll('[data-testid="lab-run-button"]:not([disabled])').length`),
		Eval[int](p, `document.querySelectorAll('[data-testid="lab-run-button"]').length`); n != 0 || all == 0 {
		t.Errorf("during a run: %d of %d run buttons enabled on the run's page, want none", n, all)
	}
	cat := c.get("/lab", http.StatusOK)
	if n := cat.Find(`[data-testid="lab-run-button"]:not([disabled])`).Length(); n != 0 {
		t.Errorf("during a run: %d run buttons enabled in the catalogue, want none", n)
	}
	p.Do("crash verdict", 2*time.Minute, chromedp.WaitVisible(sel("lab-verdict")))
	crash := c.runJSON(Eval[string](p, `location.pathname`))
	if len(crash.Ledger) != 2 || crash.Outcome != lab.OutcomeDoubleCharge {
		t.Fatalf("crash_after_gateway_charge off: got %d charges, outcome %q, want 2, double_charge", len(crash.Ledger), crash.Outcome)
	}
	for _, ch := range crash.Ledger {
		if n := Eval[int](p, `document.querySelectorAll('[data-testid="lab-event"][data-kind="charge"][data-charge-id="`+ch.ID+`"]').length`); n != 1 {
			t.Errorf("charge %s of the run's ledger: got %d events, want 1 (the killed shop's charge too)", ch.ID, n)
		}
	}
	if n := Eval[int](p, `document.querySelectorAll('[data-testid="lab-mark"]').length`); n == 0 {
		t.Errorf("crash: want the kill and the restart as marks")
	}
	mustArrowsAreMessages(t, p, crash)

	// Presenter mode: large type; → asks the room, then reveals; ← hides again.
	p.Do("present", 20*time.Second, chromedp.Navigate(p.url("/lab/runs/"+off.ID+"?present=1")), chromedp.WaitVisible(sel("lab-present")))
	screenshot(t, p, "lab-present-1024.png")
	shown := func() int {
		return Eval[int](p, `[...document.querySelectorAll('[data-testid="lab-event"]')].filter(e => e.offsetParent !== null).length`)
	}
	prompt := func() bool { return Eval[bool](p, `!document.querySelector('[data-testid="lab-prompt"]').hidden`) }
	if shown() != 0 || prompt() {
		t.Fatalf("presenter mode opens with %d events shown (prompt %v), want none", shown(), prompt())
	}
	p.Do("next", 5*time.Second, chromedp.KeyEvent(kb.ArrowRight))
	if shown() != 0 || !prompt() {
		t.Errorf("after →: %d events shown, prompt %v; want the room asked first", shown(), prompt())
	}
	p.Do("next", 5*time.Second, chromedp.KeyEvent(kb.ArrowRight), chromedp.KeyEvent(" "))
	if shown() != 2 || prompt() {
		t.Errorf("after → and space: %d events shown, prompt %v; want two events", shown(), prompt())
	}
	size := Eval[float64](p, `parseFloat(getComputedStyle(document.querySelector('[data-testid="lab-event"] summary')).fontSize)`)
	if size < 18 {
		t.Errorf("presenter mode: event text is %.1f px at 1024×768, want at least 18", size)
	}
	screenshot(t, p, "lab-present-steps-1024.png")
	p.Do("back", 5*time.Second, chromedp.KeyEvent(kb.ArrowLeft))
	if shown() != 1 {
		t.Errorf("after ←: %d events shown, want one", shown())
	}
}

// screenshot keeps the page as name in $CHECKOUTLAB_SCREENSHOTS, if set.
func screenshot(t *testing.T, p *Page, name string) {
	t.Helper()
	dir := os.Getenv("CHECKOUTLAB_SCREENSHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOrderPageLostResponseFirstRender: a customer's checkout whose first answer is lost; the
// page retries by itself and opens the order. That first render of the order page already
// lists the retry that settled it — the journal's queued events are written before the page
// reads them — with the recovery called out and the charge linked to its row in the gateway's
// ledger. On both databases, in Chromium.
func TestOrderPageLostResponseFirstRender(t *testing.T) {
	for _, dialect := range []string{models.SQLite, models.Postgres} {
		t.Run(dialect, func(t *testing.T) {
			browser := MustBrowser(t)
			st := MustStartShop(t, dialect, fastEnv)
			armFault(t, st.Gateway, map[string]any{"fault": "webhook_delay", "delay_ms": 3000}) // the retry settles it
			p := MustTab(t, browser, st, false)
			p.AddToCartAndCheckout("camp-mug")
			p.Fill(cardLost)
			p.PlaceOrder()
			p.WaitConfirmation(30 * time.Second)
			lines := Eval[[]string](p, `[...document.querySelectorAll('[data-testid="journal-event"]')].map(e => e.textContent.replace(/\s+/g, " ").trim())`)
			for _, want := range []string{"reserved: taken over", "lookup found the charge", "finished: payment succeeded", "disposition stored: 201"} {
				if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, want) }) {
					t.Errorf("first render: no event with %q in %d events:\n  %s", want, len(lines), strings.Join(lines, "\n  "))
				}
			}
			if got := Eval[string](p, `(document.querySelector('[data-testid="journal-recovered"]') || {}).textContent || ""`); got != "Response lost — recovered, charged once" {
				t.Errorf("got callout %q, want the recovery called out", got)
			}
			if link := Eval[string](p, `(document.querySelector('[data-testid="journal-charge-link"]') || {}).getAttribute?.("href") || ""`); !strings.HasPrefix(link, "/gateway#ch_") {
				t.Errorf("got charge link %q, want /gateway#<charge id>", link)
			}
			if n := Eval[int](p, `document.querySelectorAll('[data-testid="journal-glossary"]').length`); n != 1 {
				t.Error("want the one-line glossary of reservation, phase and disposition")
			}
		})
	}
}
