package fakegateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"checkoutlab/fakegateway"
	"checkoutlab/models/modelstest"
)

// chromiumPath is where CI installs Chromium (apt-get install -y chromium).
const chromiumPath = "/usr/bin/chromium"

// mustChromium starts a headless Chromium with a fresh profile. Without Chromium it skips
// locally and fails under CI.
func mustChromium(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		modelstest.SkipOrFail(t, "browser tests need Chromium at "+chromiumPath+" (apt-get install -y chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath), chromedp.Headless, chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.UserDataDir(t.TempDir()))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// TestPageInABrowser: an operator logs in with the link the gateway logs, arms and disarms a
// fault with the page's own forms; another site's forms, auto-submitted in the same logged-in
// browser, arm nothing.
func TestPageInABrowser(t *testing.T) {
	browser := mustChromium(t)
	addr := mustServe(t, func(c *fakegateway.Config) {
		c.ControlToken = testControlToken
		c.ReadHeaderTimeout, c.ReadTimeout, c.IdleTimeout = 0, 0, 0 // the defaults
	})
	base := "http://" + addr
	armed := func(t *testing.T) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+"/_control/faults", nil)
		req.Header.Set("Authorization", "Bearer "+testControlToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var list fakegateway.FaultList
		if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
			t.Fatal(err)
		}
		return len(list.Faults)
	}
	do := func(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	sel := func(testid string) chromedp.CSS { return chromedp.CSS(`[data-testid="` + testid + `"]`) }

	do(t, "log in and arm latency",
		chromedp.Navigate(base+"/?token="+testControlToken),
		chromedp.WaitVisible(sel("fault-panel")),
		chromedp.Click(chromedp.CSS(`[data-testid="fault-form-latency"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`ul[data-testid="armed-faults"]`)),
	)
	if n := armed(t); n != 1 {
		t.Fatalf("after the page's Arm: got %d armed faults, want 1", n)
	}
	do(t, "disarm", chromedp.Click(sel("disarm-all")), chromedp.WaitVisible(chromedp.CSS(`p[data-testid="armed-faults"]`)))
	if n := armed(t); n != 0 {
		t.Fatalf("after the page's Disarm all: got %d armed faults, want 0", n)
	}

	// Another origin (another port on the same host counts) posts the forms an attacker would:
	// the page's form with a guessed CSRF token, and a JSON body sent as text/plain.
	for name, form := range map[string]string{
		"UrlencodedForm": `<form method="post" action="%s/_control/faults">
			<input name="fault" value="commit_then_drop"><input name="_csrf" value="guess"></form>`,
		"TextPlainJSON": `<form method="post" action="%s/_control/faults" enctype="text/plain">
			<input name='{"fault":"commit_then_drop","code":"' value='"}'></form>`,
	} {
		t.Run(name, func(t *testing.T) {
			evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				fmt.Fprintf(w, "<!doctype html><body>"+form+"<script>document.forms[0].submit()</script></body>", base)
			}))
			defer evil.Close()
			do(t, "another site's form",
				chromedp.Navigate(evil.URL),
				chromedp.Poll[chromedp.Void](`location.href.startsWith(`+fmt.Sprintf("%q", base)+`) && document.body.innerText.includes("csrf_failed")`),
			)
			if n := armed(t); n != 0 {
				t.Errorf("got %d armed faults, want none", n)
			}
		})
	}
}
