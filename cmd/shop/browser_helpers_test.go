package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"checkoutlab/models/modelstest"
)

// chromiumPath is where CI installs Chromium (apt-get install -y chromium).
const chromiumPath = "/usr/bin/chromium"

// MustBrowser starts one headless Chromium with a fresh profile for the test and returns its
// context; tabs made with MustTab share the process but not cookies or storage. Without
// Chromium it skips locally and fails under CI.
func MustBrowser(tb testing.TB) context.Context {
	tb.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		modelstest.SkipOrFail(tb, "browser tests need Chromium at "+chromiumPath+" (apt-get install -y chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(tb.TempDir()),
		chromedp.WindowSize(1280, 1000),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	tb.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// Page is one browser tab on one shop, for one test.
type Page struct {
	tb  testing.TB
	ctx context.Context
	St  Stack
}

// recorder is injected into every document of a test's tab before the page's own scripts:
// it wraps fetch to note each POST's Idempotency-Key and answer, and notes each text of the
// checkout status line, in sessionStorage, so a test can read them after navigations.
const recorder = `(() => {
  const note = (name, v) => {
    const all = JSON.parse(sessionStorage.getItem(name) || "[]");
    all.push(v);
    sessionStorage.setItem(name, JSON.stringify(all));
  };
  const orig = window.fetch;
  window.fetch = function (url, init) {
    const key = init && init.headers && init.headers["Idempotency-Key"];
    return orig.apply(this, arguments).then(
      (res) => { note("lab.attempts", {key, status: res.status}); return res; },
      (err) => { note("lab.attempts", {key, status: 0}); throw err; });
  };
  document.addEventListener("DOMContentLoaded", () => {
    const s = document.querySelector('#checkout-form [data-testid="checkout-status"]');
    if (s) new MutationObserver(() => { if (s.textContent) note("lab.statuses", s.textContent); })
      .observe(s, {childList: true, characterData: true, subtree: true});
  });
})();`

// MustTab opens a tab in a new browser context (its own cookies and localStorage) on the
// shop. With noJS the page's scripts are off. On failure the test saves a screenshot and the
// page's HTML to a folder it names in its output.
func MustTab(tb testing.TB, browser context.Context, st Stack, noJS bool) *Page {
	tb.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	setup := []chromedp.Action[chromedp.Void]{chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: recorder})
		return err
	})}
	if noJS {
		setup = append(setup, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
			return err
		}))
	}
	if err := chromedp.Do(ctx, setup...); err != nil {
		cancel()
		tb.Fatalf("open tab: %v", err)
	}
	p := &Page{tb: tb, ctx: ctx, St: st}
	tb.Cleanup(func() {
		if tb.Failed() {
			p.saveArtifacts()
		}
		cancel()
	})
	return p
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func (p *Page) saveArtifacts() {
	dir, err := os.MkdirTemp("", "checkoutlab-browser-"+unsafeName.ReplaceAllString(p.tb.Name(), "_")+"-")
	if err != nil {
		p.tb.Logf("artifacts: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(90)); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "screenshot.png"), png, 0o644)
	}
	if html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html"))); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "page.html"), []byte(html), 0o644)
	}
	url, _ := chromedp.Run(ctx, chromedp.Location())
	p.tb.Logf("browser artifacts of %s (at %s) saved in %s", p.tb.Name(), url, dir)
}

// Do runs steps with a timeout and fails the test with what on error.
func (p *Page) Do(what string, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	p.tb.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.tb.Fatalf("%s: %v", what, err)
	}
}

// Eval evaluates a JavaScript expression in the page.
func Eval[T any](p *Page, expr string) T {
	p.tb.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.tb.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (p *Page) url(path string) string { return p.St.Shop + path }

// LoginOperator logs the tab in as an operator, as a person does: it opens the one-click link
// the shop logs, which lands on the lab.
func (p *Page) LoginOperator() {
	p.tb.Helper()
	p.Do("operator login", 20*time.Second, chromedp.Navigate(p.St.LoginURL), chromedp.WaitVisible(sel("lab-scenario")))
}

// sel is a data-testid selector.
func sel(testid string) chromedp.CSS { return chromedp.CSS(`[data-testid="` + testid + `"]`) }

// AddToCartAndCheckout browses the acme store, adds one sku, opens the cart and goes to
// checkout, through the pages' data-testid hooks.
func (p *Page) AddToCartAndCheckout(sku string) {
	p.tb.Helper()
	card := `[data-testid="product-card"][data-sku="` + sku + `"] `
	p.Do("browse and add to cart", 20*time.Second,
		chromedp.Navigate(p.url("/shop/acme")),
		chromedp.WaitVisible(chromedp.CSS(card+`[data-testid="add-to-cart"]`)),
		chromedp.Click(chromedp.CSS(card+`[data-testid="add-to-cart"]`)),
	)
	// With JavaScript htmx adds in the background and updates the count; without, the page
	// reloads with the new count. Either way the cart link shows a count above zero.
	p.Do("cart count", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`[data-testid="cart-link"] .cart-count:not([aria-label="0 items"])`)))
	p.Do("cart and checkout", 20*time.Second,
		chromedp.Click(sel("cart-link")),
		chromedp.WaitVisible(sel("cart-line")),
		chromedp.WaitVisible(sel("cart-total")),
		chromedp.Click(sel("checkout-button")),
		chromedp.WaitVisible(sel("place-order")),
	)
}

// Fill fills the checkout form's fields, with card.
func (p *Page) Fill(card string) {
	p.tb.Helper()
	field := func(name string) chromedp.CSS { return chromedp.CSS(`#checkout-form [name="` + name + `"]`) }
	p.Do("fill checkout form", 10*time.Second,
		chromedp.SetValue(field("email"), "ada@example.com"),
		chromedp.SetValue(field("name"), "Ada Lovelace"),
		chromedp.SetValue(field("address"), "1 Analytical Way"),
		chromedp.SetValue(field("city"), "London"),
		chromedp.SetValue(field("postal_code"), "N1 9GU"),
		chromedp.SetValue(field("country"), "GB"),
		chromedp.SetValue(field("card_number"), card),
	)
}

// Center returns the middle of the first element of s in the viewport, after scrolling it
// into view. It reads the box model through the DevTools protocol, so it works with the
// page's scripts off too.
func (p *Page) Center(s chromedp.CSS) (x, y float64) {
	p.tb.Helper()
	p.Do("scroll into view", 5*time.Second, chromedp.ScrollIntoView(s))
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	box, err := chromedp.Run(ctx, chromedp.Dimensions(s))
	if err != nil {
		p.tb.Fatalf("box of %s: %v", s, err)
	}
	q := box.Content // x1,y1 … x4,y4
	return (q[0] + q[4]) / 2, (q[1] + q[5]) / 2
}

// PlaceOrder clicks place-order once.
func (p *Page) PlaceOrder() {
	p.tb.Helper()
	p.Do("place order", 10*time.Second, chromedp.Click(sel("place-order")))
}

// WaitConfirmation waits for the order page and returns its order id.
func (p *Page) WaitConfirmation(timeout time.Duration) string {
	p.tb.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, timeout)
	defer cancel()
	id, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (string, error) {
		if err := chromedp.Do(ctx, chromedp.WaitVisible(sel("order-confirmation"))); err != nil {
			return "", err
		}
		return chromedp.Run(ctx, chromedp.Text(sel("order-id")))
	})
	if err != nil {
		p.tb.Fatalf("order confirmation: %v", err)
	}
	return strings.TrimSpace(id)
}

// WaitOrderStatus waits until the order page shows status (it polls by itself while a
// payment is pending).
func (p *Page) WaitOrderStatus(status string, timeout time.Duration) {
	p.tb.Helper()
	p.Do("order status "+status, timeout,
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="order-status"]`)),
		func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
			for {
				got, err := chromedp.Run(ctx, chromedp.Text(sel("order-status")))
				if err == nil && strings.TrimSpace(got) == status {
					return chromedp.Void{}, nil
				}
				select {
				case <-ctx.Done():
					return chromedp.Void{}, fmt.Errorf("got status %q, want %q: %w", got, status, ctx.Err())
				case <-time.After(200 * time.Millisecond):
				}
			}
		})
}

// Attempt is one checkout POST the page sent, as the recorder saw it.
type Attempt struct {
	Key    string `json:"key"`
	Status int    `json:"status"`
}

// Attempts returns the POSTs this tab sent with fetch, across its navigations.
func (p *Page) Attempts() []Attempt {
	p.tb.Helper()
	var a []Attempt
	_ = json.Unmarshal([]byte(Eval[string](p, `sessionStorage.getItem("lab.attempts") || "[]"`)), &a)
	return a
}

// Statuses returns the texts the checkout status line showed in this tab.
func (p *Page) Statuses() []string {
	p.tb.Helper()
	var s []string
	_ = json.Unmarshal([]byte(Eval[string](p, `sessionStorage.getItem("lab.statuses") || "[]"`)), &s)
	return s
}

// StoredKeys returns checkout.js's stored idempotency keys (localStorage), by storage name.
func (p *Page) StoredKeys() map[string]string {
	p.tb.Helper()
	return Eval[map[string]string](p, `Object.fromEntries(Object.keys(localStorage)
		.filter(k => k.startsWith("checkoutlab.idempotency."))
		.map(k => [k, JSON.parse(localStorage.getItem(k)).key]))`)
}

// OrderIDs returns the ids of the session's orders in the acme store (its orders page).
func (p *Page) OrderIDs() []string {
	p.tb.Helper()
	p.Do("orders page", 10*time.Second, chromedp.Navigate(p.url("/shop/acme/orders")), chromedp.WaitReady(chromedp.CSS("main")))
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	nodes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(`[data-testid="order-row"] a[href^="/orders/"]`), chromedp.AtLeast(0)))
	if err != nil {
		p.tb.Fatalf("order rows: %v", err)
	}
	var ids []string
	for _, n := range nodes {
		ids = append(ids, strings.TrimPrefix(n.AttributeValue("href"), "/orders/"))
	}
	return ids
}

// formPosts counts the shop's answers to POST /shop/:tenant/checkout with status, from its
// metrics: 303 is the answer to a plain form post, fetch from checkout.js gets JSON.
func formPosts(tb testing.TB, shop, status string) int {
	tb.Helper()
	res, err := http.Get(shop + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	want := `checkoutlab_http_requests_total{method="POST",route="/shop/:tenant/checkout",status="` + status + `"} `
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), want); ok {
			v, _ := strconv.Atoi(n)
			return v
		}
	}
	return 0
}

// chargesOf counts the order's charges in the gateway ledger by status.
func chargesOf(tb testing.TB, gw testGateway, orderID string) map[string]int {
	tb.Helper()
	n := map[string]int{}
	for _, c := range mustLedger(tb, gw) {
		if c.Metadata["order_id"] == orderID {
			n[c.Status]++
		}
	}
	return n
}

// mustOneCharge checks that exactly one charge of the order exists in the gateway's ledger,
// and that it succeeded: the customer paid once.
func mustOneCharge(tb testing.TB, gw testGateway, orderID string) {
	tb.Helper()
	if got := chargesOf(tb, gw, orderID); got["succeeded"] != 1 || len(got) != 1 {
		tb.Errorf("ledger for order %s: got %v, want exactly 1 succeeded charge", orderID, got)
	}
}
