package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"checkoutlab/models"
)

// TestBrowserScreenshots takes the pictures of docs/browser.md: the checkout's states as a
// customer sees them. It runs only when CHECKOUTLAB_SCREENSHOTS names a folder:
//
//	CHECKOUTLAB_SCREENSHOTS=$PWD/docs/img go test ./cmd/shop/ -run TestBrowserScreenshots
func TestBrowserScreenshots(t *testing.T) {
	dir := os.Getenv("CHECKOUTLAB_SCREENSHOTS")
	if dir == "" {
		t.Skip("set CHECKOUTLAB_SCREENSHOTS to a folder to take the documentation's screenshots")
	}
	browser := MustBrowser(t)
	// A patient shop (8 s gateway timeout), so a slow gateway keeps the page waiting.
	st := MustStartShop(t, models.SQLite, withEnv(fastEnv, map[string]string{"GATEWAY_TIMEOUT": "8s"}))
	shot := func(p *Page, name string, focus chromedp.CSS) {
		t.Helper()
		p.Do("scroll", 5*time.Second, chromedp.ScrollIntoView(focus), chromedp.Evaluate[chromedp.Void](`window.scrollBy(0, 250)`))
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

	p := MustTab(t, browser, st, false)
	p.AddToCartAndCheckout("trail-pack-30")
	p.Fill(cardOK)
	armFault(t, st.Gateway, map[string]any{"fault": "latency", "delay_ms": 6000})
	p.PlaceOrder()
	p.Do("wait", 5*time.Second, chromedp.Sleep(700*time.Millisecond))
	shot(p, "checkout-placing.png", sel("checkout-status"))
	p.Do("wait", 5*time.Second, chromedp.Sleep(3*time.Second))
	shot(p, "checkout-confirming.png", sel("checkout-status"))
	p.WaitConfirmation(20 * time.Second)
	p.WaitOrderStatus("Paid", 5*time.Second)
	shot(p, "order-paid.png", sel("order-status"))

	p.AddToCartAndCheckout("camp-mug")
	p.Fill(cardDecline)
	p.PlaceOrder()
	p.WaitConfirmation(20 * time.Second)
	p.Do("decline", 5*time.Second, chromedp.WaitVisible(sel("payment-declined")))
	shot(p, "order-declined.png", sel("payment-declined"))

	// The order page while the payment is pending: the gateway hangs without charging, and
	// the customer reloads and opens the order from the orders page.
	p.AddToCartAndCheckout("camp-mug")
	p.Fill(cardOK)
	armFault(t, st.Gateway, map[string]any{"fault": "timeout_before_commit", "delay_ms": 3000, "times": 2})
	p.PlaceOrder()
	p.Do("reload", 10*time.Second, chromedp.Sleep(150*time.Millisecond), chromedp.Reload())
	ids := p.OrderIDs()
	p.Do("order", 10*time.Second, chromedp.Navigate(p.url("/orders/"+ids[0])), chromedp.WaitVisible(sel("payment-confirming")))
	shot(p, "order-confirming.png", sel("payment-confirming"))
	p.WaitOrderStatus("Paid", 20*time.Second)

	p.AddToCartAndCheckout("camp-mug")
	p.Do("naive", 10*time.Second, chromedp.Navigate(p.url("/shop/acme/checkout?naive=1")), chromedp.WaitVisible(sel("naive-banner")))
	p.Do("top", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkout-naive.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
