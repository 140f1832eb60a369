package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"checkoutlab/models"
)

// TestBrowserPhone walks every page a demo shows on a 390×844 phone, in a real Chromium, and
// checks that none is wider than the screen (no sideways scrolling, no zooming out). On the
// way it checks what a phone user meets: the demo shortcuts fill the form, a refused submit
// puts the focus on the error summary, the confirming state locks the form and says so on the
// button, the receipt writes money and the country in words, and the gateway's fault forms
// have a label for every input.
func TestBrowserPhone(t *testing.T) {
	browser := MustBrowser(t)
	st := MustStartShop(t, models.SQLite, fastEnv)
	p := MustTab(t, browser, st, false)
	p.Do("phone viewport", 5*time.Second, chromedp.EmulateViewport(390, 844))

	// fits navigates to url and checks the page is no wider than the phone.
	fits := func(name, url string, ready chromedp.CSS) {
		t.Helper()
		p.Do("open "+name, 20*time.Second, chromedp.Navigate(url), chromedp.WaitVisible(ready))
		mustFit(t, p, name)
	}

	fits("catalogue", p.url("/shop/acme"), sel("product-card"))
	fits("product", p.url("/shop/acme/products/trail-pack-30"), sel("add-to-cart"))
	p.AddToCartAndCheckout("camp-mug")
	fits("cart", p.url("/shop/acme/cart"), sel("cart-line"))
	fits("checkout", p.url("/shop/acme/checkout"), sel("place-order"))

	// A refused submit (a typo in the card) comes back with the error summary focused.
	{
		p.Do("fill demo customer, a card with a typo", 10*time.Second,
			chromedp.Click(sel("fill-demo-customer")),
			chromedp.SetValue(chromedp.CSS(`#checkout-form [name="card_number"]`), "4242424242424241"),
		)
		if got := Eval[string](p, `document.getElementById("checkout-form").elements.name.value`); got != "Ada Lovelace" {
			t.Errorf("name after Fill demo customer: got %q, want Ada Lovelace", got)
		}
		p.PlaceOrder()
		p.Do("error summary", 15*time.Second, chromedp.WaitVisible(sel("error-summary")))
		eventually(t, 5*time.Second, "the focus on the error summary", func() bool {
			return Eval[string](p, `document.activeElement && document.activeElement.dataset.testid || ""`) == "error-summary"
		})
		if link := Eval[string](p, `(document.querySelector('[data-testid="error-summary"] a[href="#f-card_number"]') || {}).textContent || ""`); !strings.Contains(link, "Card number") {
			t.Errorf("error summary: got link %q, want one to the card number field", link)
		}
		mustFit(t, p, "checkout with errors")
	}

	// While the outcome is unknown the form is locked and the button says what is going on.
	var orderID string
	{
		// Slow motion holds each retry 5 s, so the confirming state after the lost response
		// (card 0119) stays long enough to look at.
		p.Do("use the lost-response card, slow motion", 10*time.Second,
			chromedp.Click(chromedp.CSS(`[data-testid="test-cards"] [data-card="`+cardLost+`"]`)),
			chromedp.Click(sel("slow-motion")),
		)
		if got := Eval[string](p, `document.getElementById("checkout-form").elements.card_number.value`); got != cardLost {
			t.Errorf("card after Use: got %q, want %s", got, cardLost)
		}
		p.PlaceOrder()
		p.Do("still confirming", 15*time.Second, chromedp.WaitVisible(chromedp.CSS(`[data-testid="place-order"] .spinner`)))
		eventually(t, 10*time.Second, "the button saying it is confirming", func() bool {
			return strings.Contains(Eval[string](p, `document.querySelector('[data-testid="place-order"]').textContent`), "Confirming")
		})
		state := Eval[map[string]any](p, `(() => { const f = document.getElementById("checkout-form"); return {
			busy: f.querySelector('[data-testid="place-order"]').getAttribute("aria-busy"),
			email: f.elements.email.disabled, card: f.elements.card_number.disabled,
			status: f.querySelector('[data-testid="checkout-status"]').textContent } })()`)
		if state["busy"] != "true" || state["email"] != true || state["card"] != true || !strings.HasPrefix(fmt.Sprint(state["status"]), stillConfirm) {
			t.Errorf("while confirming: got %v, want the button busy, the fields disabled and %q…", state, stillConfirm)
		}
		orderID = p.WaitConfirmation(30 * time.Second)
		p.WaitOrderStatus("Paid", 15*time.Second)
		mustOneCharge(t, st.Gateway, orderID)
		mustFit(t, p, "order")
	}
	if orderID == "" {
		t.Fatal("no order to look at")
	}

	fits("orders", p.url("/shop/acme/orders"), sel("order-row"))

	// The receipt writes money and the country as the pages do.
	{
		p.LoginOperator()
		var receipt string
		eventually(t, 15*time.Second, "the receipt in the mailbox", func() bool {
			p.Do("mailbox", 10*time.Second, chromedp.Navigate(p.url("/mailbox")), chromedp.WaitReady(chromedp.CSS("main")))
			receipt = Eval[string](p, `[...document.querySelectorAll('[data-testid="mail-message"]')].map(m => m.textContent).find(t => t.includes("`+orderID+`")) || ""`)
			return receipt != ""
		})
		// Camp mug $14.00, shipped to London (the demo customer) for free.
		if !strings.Contains(receipt, "payment of $14.00.") || !strings.Contains(receipt, "United Kingdom") || strings.Contains(receipt, "minor units") {
			t.Errorf("receipt: got %q, want the amount as $14.00 and the country as United Kingdom", strings.Join(strings.Fields(receipt), " "))
		}
		mustFit(t, p, "mailbox")
	}

	fits("reconciliation", p.url("/reconciliation"), sel("reconciliation-check"))
	fits("lab", p.url("/lab"), sel("lab-scenario"))
	p.Do("run a lab scenario", 90*time.Second,
		chromedp.Click(chromedp.CSS(`[data-testid="lab-run-form"][data-mode="protected"] button`)),
		chromedp.WaitVisible(sel("lab-verdict")))
	mustFit(t, p, "lab run")

	// The gateway's page (through the operator bar's /gateway): every fault input labelled.
	{
		fits("gateway", p.url("/gateway"), sel("fault-panel"))
		unlabelled := Eval[[]string](p, `[...document.querySelectorAll('[data-testid="fault-panel"] input:not([type=hidden]), [data-testid="fault-panel"] select')]
			.filter(f => !f.id || !f.labels || f.labels.length === 0 || !f.labels[0].textContent.trim())
			.map(f => f.closest("form").dataset.testid + " " + f.name)`)
		if len(unlabelled) > 0 {
			t.Errorf("gateway fields without a label: %v", unlabelled)
		}
		if n := Eval[int](p, `document.querySelectorAll('[data-testid="fault-panel"] input:not([type=hidden])').length`); n < 12 {
			t.Errorf("gateway fault panel: got %d inputs, want at least one per fault", n)
		}
		if Eval[string](p, `(document.querySelector('[data-testid="ledger-row"] [data-testid="order-link"]') || {}).href || ""`) == "" {
			t.Error("gateway ledger: got no order linking to the shop's order page, want one")
		}
	}
}

// mustFit fails the test if the page is wider than its viewport, naming the widest offenders.
func mustFit(tb testing.TB, p *Page, name string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	var width struct {
		Document, Viewport int
		Wide               []string
	}
	w, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`({
		document: document.documentElement.scrollWidth, viewport: window.innerWidth,
		wide: [...document.body.querySelectorAll("*")].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
			.slice(0, 5).map(e => e.tagName.toLowerCase() + (e.className ? "." + String(e.className).split(" ")[0] : "")) })`))
	if err != nil {
		tb.Fatalf("measure %s: %v", name, err)
	}
	width.Document, width.Viewport = int(w["document"].(float64)), int(w["viewport"].(float64))
	for _, e := range w["wide"].([]any) {
		width.Wide = append(width.Wide, fmt.Sprint(e))
	}
	if width.Viewport != 390 {
		tb.Fatalf("%s: got a viewport of %d px, want the phone's 390", name, width.Viewport)
	}
	if width.Document > width.Viewport {
		tb.Errorf("%s: got a page %d px wide on a %d px phone, want no wider (sticking out: %v)", name, width.Document, width.Viewport, width.Wide)
	}
}
