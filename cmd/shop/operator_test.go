package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// operatorTools are the shop's operator pages, each with a page that answers 200 once logged in.
var operatorTools = []string{"/lab", "/mailbox", "/reconciliation?tenant=globex", "/ops/reset-demo", "/gateway"}

// TestOperatorTools: the real program keeps its operator tools for operators. A browser
// without the operator session is sent to the login form, which brings it back; a script gets
// 401; the one-click link the shop logs logs a browser in; /gateway hands an operator on to
// the gateway's page, logged in there too.
func TestOperatorTools(t *testing.T) {
	st := MustStartShop(t, models.SQLite, fastEnv)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(t *testing.T, client *http.Client, url, accept string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	t.Run("ErrBrowserSentToLogin", func(t *testing.T) {
		for _, path := range operatorTools {
			res := get(t, noRedirect, st.Shop+path, "text/html")
			if want := "/ops/login?next=" + url.QueryEscape(path); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != want {
				t.Errorf("%s: got %d to %q, want 303 to %s", path, res.StatusCode, res.Header.Get("Location"), want)
			}
		}
	})
	t.Run("ErrScriptUnauthorized", func(t *testing.T) {
		for _, path := range operatorTools {
			req, _ := http.NewRequest(http.MethodGet, st.Shop+path, nil)
			res, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body struct{ Error string }
			_ = json.NewDecoder(res.Body).Decode(&body)
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized || body.Error != "operator_login_required" {
				t.Errorf("%s: got %d %q, want 401 operator_login_required", path, res.StatusCode, body.Error)
			}
		}
	})
	t.Run("ErrWrongLoginLink", func(t *testing.T) {
		if res := get(t, noRedirect, st.Shop+"/ops/login?token=forged", "text/html"); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("a forged login link: got %d, want 401", res.StatusCode)
		}
	})
	t.Run("OKLoggedIn", func(t *testing.T) {
		operator := operatorClient(t, st)
		for _, path := range operatorTools {
			res := get(t, operator, st.Shop+path, "text/html")
			if res.StatusCode != http.StatusOK {
				t.Errorf("%s as an operator: got %d, want 200", path, res.StatusCode)
			}
			// /gateway ends on the gateway's own page, which the token opened.
			if path == "/gateway" && !strings.HasPrefix(res.Request.URL.String(), st.Gateway.URL+"/") {
				t.Errorf("/gateway: ended at %s, want the gateway's page at %s", res.Request.URL, st.Gateway.URL)
			}
		}
		// The login form brings a browser back where it was going.
		jar, _ := cookiejar.New(nil)
		browser := &http.Client{Jar: jar}
		res := get(t, browser, st.LoginURL+"&next="+url.QueryEscape("/mailbox?tenant=acme"), "text/html")
		if res.StatusCode != http.StatusOK || res.Request.URL.RequestURI() != "/mailbox?tenant=acme" {
			t.Errorf("login link with next: got %d at %s, want 200 at /mailbox?tenant=acme", res.StatusCode, res.Request.URL.RequestURI())
		}
	})
}

// TestCheckHosts: with CHECK_HOSTS the shop answers only requests for its own host names, so
// a DNS-rebinding page cannot reach it under a name of the attacker's; without, any Host is served.
func TestCheckHosts(t *testing.T) {
	for _, on := range []bool{true, false} {
		st := MustStartShop(t, models.SQLite, map[string]string{"CHECK_HOSTS": strconv.FormatBool(on)})
		for host, want := range map[string]int{"": http.StatusOK, "localhost": http.StatusOK, "rebind.attacker.example": http.StatusMisdirectedRequest} {
			if !on {
				want = http.StatusOK
			}
			req, _ := http.NewRequest(http.MethodGet, st.Shop+"/shop/acme", nil)
			if host != "" {
				req.Host = host
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != want {
				t.Errorf("CHECK_HOSTS=%v, Host %q: got %d, want %d", on, host, res.StatusCode, want)
			}
		}
	}
}

// TestServeRefusesDemoSecretsInProduction: SHOP_ENV=production will not start with a secret
// anyone can read in this repository, names each one, and stores nothing; with secrets of its
// own it starts.
func TestServeRefusesDemoSecretsInProduction(t *testing.T) {
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			env := map[string]string{"SHOP_ADDR": "127.0.0.1:0", "GATEWAY_ADDR": "127.0.0.1:0", "DATA_DIR": t.TempDir(),
				"DATABASE_URL": modelstest.MustDatabaseURL(t, dialect), "LOG_LEVEL": "warn", "SHOP_ENV": "production"}
			err := run(context.Background(), nil, envOf(env), &strings.Builder{})
			if err == nil {
				t.Fatal("started in production with the demo secrets, want a refusal")
			}
			for _, want := range []string{"SHOP_ENV=production", "WEBHOOK_SECRET", "SHOP_API_KEYS (acme, globex)", "GATEWAY_CONTROL_TOKEN"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("got %q, want it to name %s", err, want)
				}
			}

			// Secrets of its own, on the same database: nothing of the refused start stands in
			// the way (it seeded no demo key).
			ctx, cancel := context.WithCancel(context.Background())
			own := withEnv(env, map[string]string{"WEBHOOK_SECRET": "whsec_" + "b3duLXNlY3JldC1vd24tc2VjcmV0LW93bi1zZWNyZXQ=",
				"GATEWAY_CONTROL_TOKEN": "own-control-token-0123456789", "SHOP_API_KEYS": "acme=sk_own_acme_key,globex=sk_own_globex_key",
				"OPS_PASSWORD": "an operator password of our own"})
			var out syncBuffer
			done := make(chan error, 1)
			go func() { done <- run(ctx, nil, envOf(own), &out) }()
			eventually(t, 20*time.Second, "the shop to start", func() bool {
				select {
				case err := <-done:
					t.Fatalf("production with its own secrets: %v\n%s", err, out.String())
				default:
				}
				return strings.Contains(out.String(), "shop listening on")
			})
			cancel()
			if err := <-done; err != nil {
				t.Errorf("shutdown: %v", err)
			}
			if log := out.String(); strings.Contains(log, "DEMO SECRETS") || strings.Contains(log, "ops/login?token=") {
				t.Errorf("log with secrets of its own: got %q, want no demo-secrets warning and no login link", log)
			}
		})
	}
}

// syncBuffer is a log a running shop writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
