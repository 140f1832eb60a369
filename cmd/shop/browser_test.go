package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"checkoutlab/models/modelstest"
)

// The browser tests drive the real checkout page (static/js/checkout.js) in a real headless
// Chromium against the real program, on both databases, and check the gateway's ledger: the
// customer is charged exactly once whatever the network, the gateway or their clicks do.
// Subtests run one after another in one browser per database, each in its own browser
// context (cookies and localStorage of its own).

const (
	cardOK       = "4242424242424242"
	cardDecline  = "4000000000000002"
	cardLost     = "4000000000000119" // commit_then_drop: charged, the answer is lost
	cardLate     = "4000000000000259" // commit_then_delay: charged, the answer comes too late
	stillConfirm = "Still confirming with the payment provider"
)

func TestBrowserCheckout(t *testing.T) {
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			browser := MustBrowser(t)
			st := MustStartShop(t, dialect, fastEnv)

			t.Run("OK", func(t *testing.T) {
				p := MustTab(t, browser, st, false)
				p.AddToCartAndCheckout("camp-mug")
				p.Fill(cardOK)
				p.PlaceOrder()
				id := p.WaitConfirmation(20 * time.Second)
				p.WaitOrderStatus("Paid", 5*time.Second)
				mustOneCharge(t, st.Gateway, id)
				if a := p.Attempts(); len(a) != 1 || a[0].Status != 201 || a[0].Key == "" {
					t.Errorf("attempts: got %+v, want one 201 with a key", a)
				}
				if k := p.StoredKeys(); len(k) != 0 {
					t.Errorf("stored keys after success: got %v, want none", k)
				}
			})

			// The gateway charges but the answer never reaches the shop; the shop answers 502
			// and the page, still honest, retries by itself with the same key.
			t.Run("OKLostResponse", func(t *testing.T) {
				p := MustTab(t, browser, st, false)
				p.AddToCartAndCheckout("camp-mug")
				p.Fill(cardLost)
				p.PlaceOrder()
				id := p.WaitConfirmation(30 * time.Second)
				p.WaitOrderStatus("Paid", 10*time.Second)
				mustOneCharge(t, st.Gateway, id)
				mustRetriedWithOneKey(t, p)
			})

			// The gateway charges and answers after the shop's 1 s timeout: 504, then the
			// page's retry resumes the operation, which asks the gateway instead of charging.
			t.Run("OKLateResponse", func(t *testing.T) {
				p := MustTab(t, browser, st, false)
				p.AddToCartAndCheckout("camp-mug")
				p.Fill(cardLate)
				p.PlaceOrder()
				id := p.WaitConfirmation(30 * time.Second)
				p.WaitOrderStatus("Paid", 10*time.Second)
				mustOneCharge(t, st.Gateway, id)
				mustRetriedWithOneKey(t, p)
			})

			t.Run("OKFiveFastClicks", func(t *testing.T) {
				p := MustTab(t, browser, st, false)
				p.AddToCartAndCheckout("camp-mug")
				p.Fill(cardOK)
				x, y := p.Center(sel("place-order"))
				clicks := make([]chromedp.Action[chromedp.Void], 5)
				for i := range clicks {
					clicks[i] = chromedp.MouseClickXY(x, y) // as fast as the protocol allows
				}
				p.Do("five clicks", 10*time.Second, clicks...)
				id := p.WaitConfirmation(20 * time.Second)
				mustOneCharge(t, st.Gateway, id)
				if a := p.Attempts(); len(a) != 1 {
					t.Errorf("attempts: got %+v, want one", a)
				}
				if ids := p.OrderIDs(); len(ids) != 1 {
					t.Errorf("orders: got %v, want one", ids)
				}
			})

			// The first attempt is in flight (the gateway is slow) when the customer reloads.
			// The shop has already turned the cart into an order, so the reload finds an empty
			// cart; the key stays stored for this cart. The order page says the payment is being
			// confirmed, offers no second payment, and updates itself (htmx polling) when the
			// shop's completer settles it: one order, one charge.
			t.Run("OKReloadInFlight", func(t *testing.T) {
				p := MustTab(t, browser, st, false)
				p.AddToCartAndCheckout("camp-mug")
				p.Fill(cardOK)
				// The gateway hangs without charging, twice, longer than the shop's 1 s
				// timeout: the payment stays pending for a few seconds after the reload, while
				// the shop's completer keeps asking and trying again under the same key.
				armFault(t, st.Gateway, map[string]any{"fault": "timeout_before_commit", "delay_ms": 3000, "times": 2})
				p.PlaceOrder()
				p.Do("first attempt in flight", 5*time.Second,
					chromedp.WaitVisible(chromedp.CSS(`#checkout-form[data-idempotency-key]`)))
				first := Eval[string](p, `document.getElementById("checkout-form").dataset.idempotencyKey`)
				p.Do("reload", 15*time.Second, chromedp.Sleep(150*time.Millisecond), chromedp.Reload())
				if keys := p.StoredKeys(); !slices.Contains(mapValues(keys), first) {
					t.Errorf("stored keys after reload: got %v, want %s kept", keys, first)
				}
				loc := Eval[string](p, `location.pathname`)
				ordered := !strings.HasSuffix(loc, "/checkout")
				if !ordered {
					// The cart was not ordered yet: placing it again carries the same key.
					p.Fill(cardOK)
					p.PlaceOrder()
					p.WaitConfirmation(20 * time.Second)
					a := p.Attempts()
					if len(a) < 2 || a[len(a)-1].Key != first {
						t.Errorf("attempts after reload: got %+v, want the last with key %s", a, first)
					}
				}
				ids := p.OrderIDs()
				if len(ids) != 1 {
					t.Fatalf("orders: got %v, want one", ids)
				}
				p.Do("open order", 10*time.Second, chromedp.Navigate(p.url("/orders/"+ids[0])))
				if ordered { // the usual case: the reload came after the shop made the order
					if !Eval[bool](p, `!!document.querySelector('[data-testid="payment-confirming"]')`) {
						t.Errorf("order page: got no payment-confirming, want the payment still being confirmed")
					}
					if Eval[bool](p, `!!document.querySelector('[data-testid="pay-form"]')`) {
						t.Errorf("order page: got a pay form while the payment is pending, want none")
					}
				}
				p.WaitOrderStatus("Paid", 15*time.Second) // the page polls while the payment is pending
				eventually(t, 5*time.Second, "one succeeded charge", func() bool {
					return succeededCharges(t, st.Gateway, ids[0]) == 1
				})
				mustOneCharge(t, st.Gateway, ids[0])
			})

			// The first attempt is held in the browser (DevTools intercepts it) when the customer
			// reloads: the cart is still open, and placing it again carries the same key.
			t.Run("OKReloadBeforeAnswer", func(t *testing.T) {
				p := MustTab(t, browser, st, false)
				p.AddToCartAndCheckout("camp-mug")
				p.Fill(cardOK)
				p.Do("hold checkout requests", 5*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
					_, err := cdp.Call(ctx, tg, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
						{URLPattern: "*/checkout", ResourceType: network.ResourceTypeFetch}}})
					return err
				}))
				p.PlaceOrder()
				p.Do("first attempt in flight", 5*time.Second,
					chromedp.WaitVisible(chromedp.CSS(`#checkout-form[data-idempotency-key]`)))
				first := Eval[string](p, `document.getElementById("checkout-form").dataset.idempotencyKey`)
				p.Do("reload", 15*time.Second, chromedp.Sleep(200*time.Millisecond), chromedp.Reload(),
					chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
						_, err := cdp.Call(ctx, tg, fetch.Disable, cdp.Empty{})
						return err
					}),
					chromedp.WaitVisible(sel("place-order")))
				p.Fill(cardOK)
				p.PlaceOrder()
				id := p.WaitConfirmation(20 * time.Second)
				if a := p.Attempts(); len(a) == 0 || a[len(a)-1].Key != first || a[len(a)-1].Status != 201 {
					t.Errorf("attempts: got %+v, want the last a 201 under the first key %s", a, first)
				}
				mustOneCharge(t, st.Gateway, id)
				if ids := p.OrderIDs(); len(ids) != 1 {
					t.Errorf("orders: got %v, want one", ids)
				}
			})

			// After a success the key is forgotten: the same items bought again are a new
			// operation, with a new key, a second order and a second charge.
			t.Run("OKSameItemsAgain", func(t *testing.T) {
				p := MustTab(t, browser, st, false)
				var ids []string
				for range 2 {
					p.AddToCartAndCheckout("camp-mug")
					p.Fill(cardOK)
					p.PlaceOrder()
					ids = append(ids, p.WaitConfirmation(20*time.Second))
				}
				if ids[0] == ids[1] {
					t.Errorf("orders: got %v twice, want two orders", ids[0])
				}
				a := p.Attempts()
				if len(a) != 2 || a[0].Key == a[1].Key {
					t.Errorf("attempts: got %+v, want two with different keys", a)
				}
				for _, id := range ids {
					mustOneCharge(t, st.Gateway, id)
				}
			})

			// A decline lands on the order page with the reason and a pay form; another card
			// pays the order, once.
			t.Run("ErrDeclinedThenOK", func(t *testing.T) {
				p := MustTab(t, browser, st, false)
				p.AddToCartAndCheckout("camp-mug")
				p.Fill(cardDecline)
				p.PlaceOrder()
				id := p.WaitConfirmation(20 * time.Second)
				p.Do("decline shown", 10*time.Second,
					chromedp.WaitVisible(sel("payment-declined")),
					chromedp.WaitVisible(sel("pay-form")),
					chromedp.SetValue(chromedp.CSS(`[data-testid="pay-form"] [name="card_number"]`), cardOK),
					chromedp.Click(chromedp.CSS(`[data-testid="pay-form"] [data-testid="place-order"]`)),
				)
				p.WaitOrderStatus("Paid", 20*time.Second)
				if got := chargesOf(t, st.Gateway, id); got["succeeded"] != 1 || got["failed"] != 1 {
					t.Errorf("ledger for order %s: got %v, want 1 failed and 1 succeeded", id, got)
				}
			})

			// The failure lab's naive client makes a new key on every retry, and says so.
			t.Run("OKNaiveClientNewKeyPerRetry", func(t *testing.T) {
				p := MustTab(t, browser, st, false)
				p.AddToCartAndCheckout("camp-mug")
				p.Do("naive checkout", 10*time.Second,
					chromedp.Navigate(p.url("/shop/acme/checkout?naive=1")), chromedp.WaitVisible(sel("naive-banner")))
				p.Fill(cardLost)
				p.PlaceOrder()
				id := p.WaitConfirmation(30 * time.Second)
				a := p.Attempts()
				if len(a) < 2 || a[0].Key == a[1].Key {
					t.Errorf("naive attempts: got %+v, want a retry under a new key", a)
				}
				t.Logf("naive client: attempts %+v, ledger of %s: %v", a, id, chargesOf(t, st.Gateway, id))
			})

			// Without JavaScript the form posts with the server-rendered key; a double submit
			// (the second while the first waits on a slow gateway) makes one order.
			t.Run("OKWithoutJavaScript", func(t *testing.T) {
				p := MustTab(t, browser, st, true)
				p.AddToCartAndCheckout("camp-mug")
				p.Fill(cardOK)
				armFault(t, st.Gateway, map[string]any{"fault": "latency", "delay_ms": 700})
				before := formPosts(t, st.Shop, "303")
				x, y := p.Center(sel("place-order"))
				p.Do("double submit", 10*time.Second,
					chromedp.MouseClickXY(x, y), chromedp.Sleep(150*time.Millisecond), chromedp.MouseClickXY(x, y))
				id := p.WaitConfirmation(30 * time.Second)
				p.WaitOrderStatus("Paid", 15*time.Second)
				mustOneCharge(t, st.Gateway, id)
				if got := formPosts(t, st.Shop, "303") - before; got != 2 {
					t.Errorf("plain form posts answered 303: got %d, want 2 (the double submit)", got)
				}
				if ids := p.OrderIDs(); len(ids) != 1 {
					t.Errorf("orders: got %v, want one", ids)
				}
			})
		})
	}
}

// mustRetriedWithOneKey checks the page's own retries: more than one attempt, every one under
// the same key, and the honest "still confirming" status shown meanwhile.
func mustRetriedWithOneKey(tb testing.TB, p *Page) {
	tb.Helper()
	a := p.Attempts()
	if len(a) < 2 {
		tb.Errorf("attempts: got %+v, want a retry", a)
	}
	for _, x := range a {
		if x.Key != a[0].Key {
			tb.Errorf("attempts: got keys %+v, want one key for all", a)
			break
		}
	}
	if s := p.Statuses(); !slices.ContainsFunc(s, func(v string) bool { return strings.HasPrefix(v, stillConfirm) }) {
		tb.Errorf("statuses: got %q, want %q… while retrying", s, stillConfirm)
	}
}

func mapValues(m map[string]string) []string {
	var v []string
	for _, x := range m {
		v = append(v, x)
	}
	return v
}
