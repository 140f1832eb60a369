package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

func TestRun(t *testing.T) {
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			st := MustStartShop(t, dialect, nil)
			base := st.Shop

			// The in-process gateway's control API wants the shop's GATEWAY_CONTROL_TOKEN.
			for token, want := range map[string]int{"": http.StatusUnauthorized, "not-the-token-at-all": http.StatusUnauthorized,
				st.Gateway.Token: http.StatusOK} {
				req, _ := http.NewRequest(http.MethodGet, st.Gateway.URL+"/_control/ledger", nil)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != want {
					t.Errorf("in-process gateway ledger with token %q: got %d, want %d", token, res.StatusCode, want)
				}
			}

			res, err := http.Get(base + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Errorf("healthz: got %d, want 200", res.StatusCode)
			}

			req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/products", nil)
			req.Header.Set("Authorization", "Bearer sk_test_globex")
			res, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body struct {
				Products []struct{ SKU, Currency string } `json:"products"`
			}
			err = json.NewDecoder(res.Body).Decode(&body)
			res.Body.Close()
			if err != nil || res.StatusCode != http.StatusOK || len(body.Products) < 6 || body.Products[0].Currency != "EUR" {
				t.Errorf("products: got %d with %d products (%v), want 200 with globex's EUR catalogue", res.StatusCode, len(body.Products), err)
			}

			res, err = http.Get(base + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			metrics, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if !strings.Contains(string(metrics), "checkoutlab_http_requests_total") {
				t.Errorf("metrics: checkoutlab_http_requests_total missing")
			}
		})
	}
}

func TestRunMigrate(t *testing.T) {
	var out strings.Builder
	err := run(context.Background(), []string{"migrate"}, envOf(map[string]string{"DATA_DIR": t.TempDir()}), &out)
	if err != nil || !strings.Contains(out.String(), "migrations applied (sqlite)") {
		t.Errorf("migrate: got %q, %v", out.String(), err)
	}
}

// TestRunReset: `shop reset` puts the demo stock back on the configured database, says what
// it restored, and keeps the orders. On both databases.
func TestRunReset(t *testing.T) {
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			st := MustStartShop(t, dialect, fastEnv)
			if a := post(st.Shop, "/api/v1/checkout", "before-reset", checkoutBody("4242424242424242")); a.Status != http.StatusCreated {
				t.Fatalf("checkout: got %d %s, want 201", a.Status, a.Raw)
			}
			if err := st.DB.Exec("UPDATE products SET stock = 0, amount = 1 WHERE sku = 'brass-compass'").Error; err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			if err := run(context.Background(), []string{"reset"}, envOf(st.Env), &out); err != nil {
				t.Fatalf("reset: %v\n%s", err, out.String())
			}
			if got := out.String(); !strings.Contains(got, "demo reset ("+dialect+")") || !strings.Contains(got, "products of acme and globex restored") {
				t.Errorf("reset said %q, want what it restored", got)
			}
			var p models.Product
			if err := st.DB.Where("tenant_id = ? AND sku = ?", "acme", "brass-compass").First(&p).Error; err != nil {
				t.Fatal(err)
			}
			if p.Stock != 5 || p.Amount == 1 {
				t.Errorf("brass-compass after reset: stock %d, amount %d; want the seeded stock 5 and price", p.Stock, p.Amount)
			}
			var orders int64
			st.DB.Model(&models.Order{}).Count(&orders)
			if orders != 1 {
				t.Errorf("orders after reset: got %d, want the 1 placed before (kept)", orders)
			}
		})
	}
}

// TestServe runs the program as `go run ./cmd/shop` does, on free ports: it says where the
// shop and the gateway really listen, warns that it runs with the demo secrets, logs the
// operator's one-click login link (which logs a browser in), and returns nil once its context
// is cancelled.
func TestServe(t *testing.T) {
	env := map[string]string{"SHOP_ADDR": "127.0.0.1:0", "GATEWAY_ADDR": "127.0.0.1:0", "DATA_DIR": t.TempDir(), "LOG_LEVEL": "warn"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, nil, envOf(env), pw)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	sc := bufio.NewScanner(pr)
	var said []string
	var warned, login string
	for len(said) < 2 && sc.Scan() {
		switch line := sc.Text(); {
		case strings.Contains(line, "listening on http://127.0.0.1:"):
			said = append(said, line)
		case strings.Contains(line, "DEMO SECRETS IN USE"):
			warned = line
		case strings.Contains(line, "operator login"):
			if m := regexp.MustCompile(`url="?([^"\s]+)`).FindStringSubmatch(line); m != nil {
				login = m[1]
			}
		}
	}
	go io.Copy(io.Discard, pr)
	if len(said) != 2 || strings.Contains(strings.Join(said, ""), ":0 ") {
		t.Errorf("got %q, want the gateway's and the shop's real addresses", said)
	}
	for _, name := range []string{"WEBHOOK_SECRET", "SHOP_API_KEYS (acme, globex)", "GATEWAY_CONTROL_TOKEN"} {
		if !strings.Contains(warned, name) || !strings.Contains(warned, "level=WARN") {
			t.Errorf("got the warning %q, want a warning naming %s", warned, name)
		}
	}
	if !strings.Contains(login, "/ops/login?token=") || strings.Contains(login, ":0/") {
		t.Errorf("got the login link %q, want /ops/login?token=… on the shop's real address", login)
	} else if len(said) == 2 {
		operatorClient(t, Stack{LoginURL: login})
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run returned %v after shutdown, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Errorf("run did not return within 15s of shutdown")
	}
}

// TestHelp: -h on the program and on each of its commands exits 0 and lists what exists; an
// unknown command exits 1 saying so.
func TestHelp(t *testing.T) {
	shop := mustShopBinary(t)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-h"}, []string{"serve", "migrate", "reset", "lab", "-addr", "SHOP_ADDR", "-journal-retention",
			"GATEWAY_CONTROL_TOKEN", "OPS_PASSWORD", "SHOP_SECRET", "SHOP_ENV", "ORDER_HOLD", "CHECK_HOSTS"}},
		{[]string{"reset", "-h"}, []string{"-database-url", "DATABASE_URL"}},
		{[]string{"serve", "-h"}, []string{"-addr", "SHOP_ADDR"}},
		{[]string{"migrate", "-h"}, []string{"-database-url", "DATABASE_URL"}},
		{[]string{"lab", "-h"}, []string{"list", "run", "shop"}},
		{[]string{"lab", "list", "-h"}, []string{"usage: shop lab list"}},
		{[]string{"lab", "run", "-h"}, []string{"-json", "-database-url", "-shop", "-gateway"}},
		{[]string{"lab", "shop", "-h"}, []string{"-off", "server_idempotency"}},
	} {
		out, err := exec.Command(shop, c.args...).CombinedOutput()
		if err != nil {
			t.Errorf("shop %v: got %v, want exit 0\n%s", c.args, err, out)
		}
		for _, w := range c.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("shop %v: the help does not mention %q:\n%s", c.args, w, out)
			}
		}
	}
	out, err := exec.Command(shop, "walk").CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 || !strings.Contains(string(out), `unknown command "walk"`) {
		t.Errorf("shop walk: got %v %q, want exit 1 naming the unknown command", err, out)
	}
}
