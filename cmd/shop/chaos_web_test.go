package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"checkoutlab/models"
)

// TestBrowserChaos starts a tiny chaos run from /lab/chaos in Chromium, watches its live
// progress and checks the totals of its result page.
func TestBrowserChaos(t *testing.T) {
	browser := MustBrowser(t)
	st := MustStartShop(t, models.SQLite, nil)
	p := MustTab(t, browser, st, false)
	p.LoginOperator() // the lab is an operator's tool
	p.Do("open chaos mode", 20*time.Second, chromedp.Navigate(p.url("/lab/chaos")), chromedp.WaitVisible(sel("chaos-form")))
	p.Do("start a run", 10*time.Second,
		chromedp.SetValue(sel("chaos-purchases"), "24"),
		chromedp.SetValue(sel("chaos-replicas"), "2"),
		chromedp.Click(sel("chaos-start")),
		chromedp.WaitVisible(sel("chaos-progress")))
	if loc := Eval[string](p, `location.pathname`); !strings.HasPrefix(loc, "/lab/chaos/runs/") {
		t.Errorf("got location %q, want /lab/chaos/runs/…", loc)
	}
	if total := Eval[string](p, `document.querySelector('[data-testid="chaos-progress"]').dataset.total`); total != "24" {
		t.Errorf("progress: got total %q, want 24", total)
	}
	p.Do("the result", 150*time.Second, chromedp.WaitVisible(sel("chaos-verdict")), chromedp.WaitVisible(sel("chaos-chart")))
	text := func(id string) string {
		return strings.TrimSpace(Eval[string](p, `document.querySelector('[data-testid="`+id+`"]').textContent`))
	}
	if ok := Eval[string](p, `document.querySelector('[data-testid="chaos-verdict"]').dataset.ok`); ok != "true" {
		t.Errorf("got verdict %q (ok %s), want ok", text("chaos-verdict"), ok)
	}
	answered, _ := strconv.Atoi(text("chaos-answered"))
	gaveUp, _ := strconv.Atoi(text("chaos-gave-up"))
	if text("chaos-purchases-total") != "24" || answered+gaveUp != 24 {
		t.Errorf("got %s purchases, %d answered + %d gave up, want 24 in all", text("chaos-purchases-total"), answered, gaveUp)
	}
	for _, id := range []string{"chaos-double-charges", "chaos-lost", "chaos-duplicate-orders"} {
		if got := text(id); got != "0" {
			t.Errorf("%s: got %s, want 0", id, got)
		}
	}
	if got := text("chaos-overcharge"); got != "nothing" {
		t.Errorf("overcharge: got %q, want nothing", got)
	}
	if n := Eval[int](p, `document.querySelectorAll('[data-testid="chaos-invariant"][data-holds="true"]').length`); n != 6 {
		t.Errorf("got %d invariants holding, want 6", n)
	}
}
