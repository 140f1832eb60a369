package fakegateway_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"checkoutlab/fakegateway"
)

// armedFaults lists the armed faults with the control token, whatever the test sent before.
func (g *testGateway) armedFaults(t *testing.T) []fakegateway.Fault {
	t.Helper()
	var list fakegateway.FaultList
	g.mustDo(t, http.MethodGet, "/_control/faults", nil, map[string]string{"Authorization": "Bearer " + testControlToken}).decode(t, &list)
	return list.Faults
}

func TestControlToken(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		g := mustGateway(t, dialect, noSender)
		latency := map[string]any{"fault": "latency", "delay_ms": 10}

		for name, auth := range map[string]string{
			"RefusedWithoutToken": "",
			"RefusedWrongToken":   "Bearer not-the-control-token-at-all",
			"RefusedOtherScheme":  "Basic " + testControlToken,
			"RefusedTokenPrefix":  "Bearer " + testControlToken[:20],
		} {
			t.Run(name, func(t *testing.T) {
				for _, path := range []string{"/_control/ledger", "/_control/faults", "/_control/deliveries"} {
					r := g.mustDo(t, http.MethodGet, path, nil, map[string]string{"Authorization": auth})
					if r.Status != http.StatusUnauthorized || r.errorCode(t) != "unauthorized" {
						t.Errorf("GET %s: got %d %s, want 401 unauthorized", path, r.Status, r.Body)
					}
					if r.Header.Get("WWW-Authenticate") == "" {
						t.Errorf("GET %s: no WWW-Authenticate header", path)
					}
				}
				for _, path := range []string{"/_control/faults", "/_control/faults/disarm", "/_control/events/evt_x/resend"} {
					r := g.mustDo(t, http.MethodPost, path, latency, map[string]string{"Authorization": auth})
					if r.Status != http.StatusUnauthorized || r.errorCode(t) != "unauthorized" {
						t.Errorf("POST %s: got %d %s, want 401 unauthorized", path, r.Status, r.Body)
					}
				}
				if r := g.mustDo(t, http.MethodDelete, "/_control/faults", nil, map[string]string{"Authorization": auth}); r.Status != http.StatusUnauthorized {
					t.Errorf("DELETE /_control/faults: got %d, want 401", r.Status)
				}
				if faults := g.armedFaults(t); len(faults) != 0 {
					t.Errorf("got %d armed faults, want none armed without the token", len(faults))
				}
			})
		}
		t.Run("AllowedWithToken", func(t *testing.T) {
			defer g.mustDo(t, http.MethodDelete, "/_control/faults", nil, nil)
			// Lower case "bearer" is the same scheme (RFC 9110: schemes are case-insensitive).
			for _, auth := range []string{"Bearer " + testControlToken, "bearer " + testControlToken} {
				r := g.mustDo(t, http.MethodPost, "/_control/faults", latency, map[string]string{"Authorization": auth})
				if r.Status != http.StatusCreated {
					t.Fatalf("arm with %q: got %d %s, want 201", auth, r.Status, r.Body)
				}
			}
			if faults := g.armedFaults(t); len(faults) != 2 {
				t.Errorf("got %d armed faults, want 2", len(faults))
			}
			if r := g.mustDo(t, http.MethodGet, "/_control/ledger", nil, nil); r.Status != http.StatusOK {
				t.Errorf("ledger: got %d, want 200", r.Status)
			}
		})
		t.Run("ProviderAPINeedsNoToken", func(t *testing.T) {
			r := g.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(500, cardOK, "ord_tokenless"), key("tokenless-1"))
			if r.Status != http.StatusCreated {
				t.Errorf("charge: got %d %s, want 201: the shop's API calls carry no control token", r.Status, r.Body)
			}
		})
		t.Run("HealthzNeedsNoToken", func(t *testing.T) {
			r := g.mustDo(t, http.MethodGet, "/healthz", nil, nil)
			if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"ok"`) {
				t.Errorf("healthz: got %d %s, want 200 ok", r.Status, r.Body)
			}
		})
	})
}

// Without a control token the control API stays open: the shop's in-process gateway and its
// clients work until they send a token.
func TestControlOpenWithoutToken(t *testing.T) {
	g := mustGateway(t, "sqlite", noSender, openControl)
	r := g.mustDo(t, http.MethodPost, "/_control/faults", map[string]any{"fault": "latency", "delay_ms": 10}, nil)
	if r.Status != http.StatusCreated {
		t.Fatalf("arm without a token: got %d %s, want 201", r.Status, r.Body)
	}
	r = g.mustDo(t, http.MethodGet, "/_control/ledger", nil, map[string]string{"Authorization": "Bearer anything-goes-here"})
	if r.Status != http.StatusOK {
		t.Errorf("ledger with any bearer: got %d, want 200", r.Status)
	}
	status, body := g.browser.get(t, "/")
	if status != http.StatusOK || !strings.Contains(body, `data-testid="fault-panel"`) {
		t.Errorf("page: got %d, want 200 with the fault panel and no login", status)
	}
}

func TestNewRefusesAWeakControlToken(t *testing.T) {
	db := mustStore(t, "sqlite").mustOpen(t)
	for name, token := range map[string]string{
		"TooShort":  "short-token",
		"Space":     "a control token with spaces",
		"Ampersand": "token-for-the-url&x=1",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := fakegateway.New(fakegateway.Config{DB: db, ControlToken: token}); err == nil {
				t.Errorf("New with control token %q: got nil, want an error", token)
			}
		})
	}
	if _, err := fakegateway.New(fakegateway.Config{DB: db, ControlToken: fakegateway.DemoControlToken}); err != nil {
		t.Errorf("New with DemoControlToken: got %v, want nil", err)
	}
}

func TestPageLogin(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		g := mustGateway(t, dialect, noSender)

		t.Run("RefusedWithoutSession", func(t *testing.T) {
			b := newBrowser(t, g)
			for _, path := range []string{"/", "/?partial=live"} {
				status, body := b.get(t, path)
				if status != http.StatusUnauthorized || !strings.Contains(body, `data-testid="gateway-login"`) {
					t.Errorf("GET %s: got %d, want 401 with the login form", path, status)
				}
				if strings.Contains(body, `data-testid="ledger"`) || strings.Contains(body, `data-testid="fault-panel"`) {
					t.Errorf("GET %s: the login page shows the ledger or the fault panel", path)
				}
			}
		})
		t.Run("RefusedWrongToken", func(t *testing.T) {
			b := newBrowser(t, g)
			status, body := b.get(t, "/?token=not-the-control-token-at-all")
			if status != http.StatusUnauthorized || !strings.Contains(body, `data-testid="gateway-login-error"`) {
				t.Errorf("got %d, want 401 saying the token is wrong", status)
			}
			if strings.Contains(body, "not-the-control-token-at-all") {
				t.Error("the login page repeats the token it was given")
			}
			if status, _ := b.get(t, "/"); status != http.StatusUnauthorized {
				t.Errorf("after a wrong token: got %d, want 401", status)
			}
		})
		t.Run("LoginSetsASession", func(t *testing.T) {
			b := newBrowser(t, g)
			req, _ := http.NewRequest(http.MethodGet, g.srv.URL+"/?token="+testControlToken, nil)
			resp, err := b.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
				t.Fatalf("got %d to %q, want 303 to / (the token leaves the address bar)", resp.StatusCode, resp.Header.Get("Location"))
			}
			var session *http.Cookie
			for _, c := range resp.Cookies() {
				if c.Name == "fakegateway_session" {
					session = c
				}
			}
			if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || strings.Contains(session.Value, testControlToken) {
				t.Fatalf("session cookie: got %+v, want HttpOnly, SameSite=Lax, not the token", session)
			}
			if page := b.page(t, "/"); !strings.Contains(page, `data-testid="fault-panel"`) {
				t.Error("logged in: the page has no fault panel")
			}
			// The page's session also reads the control API, as a browser tab on /_control/ledger.
			if status, _ := b.get(t, "/_control/ledger"); status != http.StatusOK {
				t.Errorf("ledger with the session: got %d, want 200", status)
			}
		})
		t.Run("BearerReadsThePage", func(t *testing.T) {
			status, _ := newBrowser(t, g).get(t, "/", "Authorization", "Bearer "+testControlToken)
			if status != http.StatusOK {
				t.Errorf("got %d, want 200", status)
			}
		})
		t.Run("RefusedForgedCookie", func(t *testing.T) {
			b := newBrowser(t, g)
			b.login(t)
			u, _ := url.Parse(g.srv.URL)
			ck := b.client.Jar.Cookies(u)[0]
			nonce, _, _ := strings.Cut(ck.Value, ".")
			b.client.Jar.SetCookies(u, []*http.Cookie{{Name: ck.Name, Value: nonce + ".forged", Path: "/"}})
			if status, _ := b.get(t, "/"); status != http.StatusUnauthorized {
				t.Errorf("forged cookie: got %d, want 401", status)
			}
		})
		t.Run("SessionSurvivesRestartNotANewToken", func(t *testing.T) {
			b := newBrowser(t, g)
			b.login(t)
			u, _ := url.Parse(g.srv.URL)
			cookies := b.client.Jar.Cookies(u)

			same := mustGatewayOn(t, g.store, g.hooks, noSender)
			again := newBrowser(t, same)
			su, _ := url.Parse(same.srv.URL)
			again.client.Jar.SetCookies(su, cookies)
			if status, _ := again.get(t, "/"); status != http.StatusOK {
				t.Errorf("same token after a restart: got %d, want 200", status)
			}

			other := mustGatewayOn(t, g.store, g.hooks, noSender, func(c *fakegateway.Config) { c.ControlToken = "another-control-token-9876543210" })
			stale := newBrowser(t, other)
			ou, _ := url.Parse(other.srv.URL)
			stale.client.Jar.SetCookies(ou, cookies)
			if status, _ := stale.get(t, "/"); status != http.StatusUnauthorized {
				t.Errorf("a new token: got %d, want 401 (changing the token logs everyone out)", status)
			}
		})
	})
}

func TestPageCSRF(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		for _, mode := range []struct {
			name string
			opts []gwOption
		}{{"WithToken", []gwOption{noSender}}, {"OpenControl", []gwOption{noSender, openControl}}} {
			t.Run(mode.name, func(t *testing.T) {
				g := mustGateway(t, dialect, mode.opts...)
				arm := func() url.Values { return url.Values{"fault": {"latency"}, "delay_ms": {"10"}} }
				refused := func(t *testing.T, resp *http.Response, why string) {
					t.Helper()
					if resp.StatusCode != http.StatusForbidden {
						t.Errorf("%s: got %d, want 403", why, resp.StatusCode)
					}
					if faults := g.armedFaults(t); len(faults) != 0 {
						t.Errorf("%s: got %d armed faults, want none", why, len(faults))
					}
				}
				page := g.page(t, "/")
				if n := strings.Count(page, `name="_csrf"`); n < strings.Count(page, `method="post"`) || n == 0 {
					t.Errorf("got %d CSRF fields for %d forms, want one per form", n, strings.Count(page, `method="post"`))
				}

				refused(t, g.browser.postForm(t, "/_control/faults", url.Values{"fault": {"latency"}, "_csrf": {""}}), "no CSRF token")
				refused(t, g.browser.postForm(t, "/_control/faults", url.Values{"fault": {"latency"}, "_csrf": {"made-up"}}), "a made-up CSRF token")

				other := newBrowser(t, g)
				other.page(t, "/")
				refused(t, g.browser.postForm(t, "/_control/faults", url.Values{"fault": {"latency"}, "_csrf": {other.csrf}}),
					"another session's CSRF token")

				// Another site's form, in the browser of someone logged in: the browser reports
				// where it comes from, and the gateway refuses it even with a valid token.
				refused(t, g.browser.postForm(t, "/_control/faults", arm(),
					"Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example"), "a cross-site form")
				refused(t, g.browser.postForm(t, "/_control/faults", arm(), "Origin", "http://evil.example"),
					"a cross-origin form (Origin only)")

				if resp := g.browser.postForm(t, "/_control/faults", arm(), "Sec-Fetch-Site", "same-origin"); resp.StatusCode != http.StatusSeeOther {
					t.Fatalf("the page's own form: got %d, want 303", resp.StatusCode)
				}
				if faults := g.armedFaults(t); len(faults) != 1 {
					t.Errorf("got %d armed faults after the page's form, want 1", len(faults))
				}
			})
		}
	})
}

// A cross-site form can send a JSON body as text/plain, with no cookie and no token. While the
// control API is open that is all it would need; the browser's own origin headers stop it.
func TestCrossOriginJSONRefused(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		g := mustGateway(t, dialect, noSender, openControl)
		ch := g.mustCharge(t, "cross-origin-refund", cardOK)
		crossSite := map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}

		r := g.mustDo(t, http.MethodPost, "/_control/faults", `{"fault":"commit_then_drop"}`, crossSite)
		if r.Status != http.StatusForbidden || r.errorCode(t) != "csrf_failed" {
			t.Errorf("arm: got %d %s, want 403 csrf_failed", r.Status, r.Body)
		}
		r = g.mustDo(t, http.MethodPost, "/v1/charges/"+ch.ID+"/refunds", `{}`, crossSite)
		if r.Status != http.StatusForbidden {
			t.Errorf("refund: got %d %s, want 403", r.Status, r.Body)
		}
		if faults := g.armedFaults(t); len(faults) != 0 {
			t.Errorf("got %d armed faults, want none", len(faults))
		}
		for _, c := range g.ledger(t) {
			if c.ID == ch.ID && c.Refunded {
				t.Error("the charge was refunded by a cross-site request")
			}
		}
	})
}

// The page shows a fixed message per error code; whatever else /?error= holds is not shown.
func TestPageErrorIsACode(t *testing.T) {
	g := mustGateway(t, "sqlite", noSender)
	for _, bait := range []string{"Your session expired, call +1 555 0100", "<b>owned</b>", "invalid_request<script>"} {
		page := g.page(t, "/?error="+url.QueryEscape(bait))
		if strings.Contains(page, "555 0100") || strings.Contains(page, "owned") || strings.Contains(page, `data-testid="gateway-error"`) {
			t.Errorf("?error=%q: the page shows it", bait)
		}
	}
	if page := g.page(t, "/?error=unknown_fault"); !strings.Contains(page, "the gateway has no fault of that name") {
		t.Error("?error=unknown_fault: the page does not show its message")
	}
	resp := g.postForm(t, "/_control/faults", url.Values{"fault": {"meteor"}})
	if loc := resp.Header.Get("Location"); loc != "/?error=unknown_fault" {
		t.Errorf("unknown fault by form: got %q, want /?error=unknown_fault", loc)
	}
	resp = g.postForm(t, "/_control/events/evt_nope/resend", url.Values{})
	if loc := resp.Header.Get("Location"); loc != "/?error=resource_missing" {
		t.Errorf("resend of an unknown event: got %q, want /?error=resource_missing", loc)
	}
}
