package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"checkoutlab/models/modelstest"
)

// Stack is a running shop and the gateway it talks to.
type Stack struct {
	Shop    string // base URL of the shop
	Gateway string // base URL of the in-process fake gateway ("" with GATEWAY_URL)
	Env     map[string]string
}

// MustStartShop runs the real program, run(), on a free port with the given extra environment
// and returns its base URLs. The shop stops (and run must return) when the test ends.
func MustStartShop(tb testing.TB, dialect string, extra map[string]string) Stack {
	tb.Helper()
	env := map[string]string{
		"SHOP_ADDR":    "127.0.0.1:0",
		"GATEWAY_ADDR": "127.0.0.1:0",
		"DATA_DIR":     tb.TempDir(),
		"DATABASE_URL": modelstest.MustDatabaseURL(tb, dialect),
		"LOG_LEVEL":    "warn",
	}
	for k, v := range extra {
		env[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, nil, envOf(env), pw)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("run returned %v after shutdown, want nil", err)
			}
		case <-time.After(15 * time.Second):
			tb.Errorf("run did not return within 15s of shutdown")
		}
	})

	stacks := make(chan Stack, 1)
	go func() {
		st := Stack{Env: env}
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if _, rest, ok := strings.Cut(line, "fake gateway listening on "); ok {
				st.Gateway = strings.Fields(rest)[0]
			}
			if _, rest, ok := strings.Cut(line, "shop listening on "); ok {
				st.Shop = strings.Fields(rest)[0]
				stacks <- st
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case st := <-stacks:
		return st
	case err := <-done:
		tb.Fatalf("run ended before listening: %v", err)
	case <-time.After(30 * time.Second):
		tb.Fatal("shop did not start within 30s")
	}
	return Stack{}
}

func TestRun(t *testing.T) {
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			st := MustStartShop(t, dialect, nil)
			base := st.Shop

			res, err := http.Get(st.Gateway + "/_control/ledger")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Errorf("in-process gateway ledger: got %d, want 200", res.StatusCode)
			}

			res, err = http.Get(base + "/healthz")
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
