package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"checkoutlab/fakegateway"
	"checkoutlab/models/modelstest"
)

// syncBuffer is stdout for run: written by its goroutines, read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startRun runs the command on port 0 and returns its base URL and a stop function that
// waits for a clean exit.
func startRun(t *testing.T, env map[string]string) (string, func()) {
	t.Helper()
	base, _, stop := startRunOutput(t, env)
	return base, stop
}

// startRunOutput is startRun that also returns the command's output.
func startRunOutput(t *testing.T, env map[string]string) (string, *syncBuffer, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, func(k string) string { return env[k] }, out) }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, line := range strings.Split(out.String(), "\n") {
			if base, ok := strings.CutPrefix(line, "fakegateway listening on "); ok {
				stop := func() {
					cancel()
					if err := <-done; err != nil {
						t.Errorf("run returned %v, want nil after a clean shutdown", err)
					}
				}
				return base, out, stop
			}
		}
		select {
		case err := <-done:
			t.Fatalf("run ended early: %v\n%s", err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no listening line:\n%s", out.String())
		}
	}
}

func TestRunServesAndSurvivesRestart(t *testing.T) {
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var hooks []string
			shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hooks = append(hooks, r.URL.Path+" "+r.Header.Get("webhook-id"))
				mu.Unlock()
			}))
			defer shop.Close()
			env := map[string]string{
				"GATEWAY_ADDR":    "127.0.0.1:0",
				"DATA_DIR":        t.TempDir(),
				"DATABASE_URL":    modelstest.MustDatabaseURL(t, dialect),
				"SHOP_PUBLIC_URL": shop.URL,
			}
			base, stop := startRun(t, env)
			req, _ := http.NewRequest(http.MethodPost, base+"/v1/charges",
				strings.NewReader(`{"amount":1000,"currency":"EUR","card_number":"4242424242424242","metadata":{"order_id":"ord_1"}}`))
			req.Header.Set("Idempotency-Key", "run-1")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("charge: got %d, want 201", resp.StatusCode)
			}
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				mu.Lock()
				n := len(hooks)
				mu.Unlock()
				if n >= 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("got %d webhooks, want 2", n)
				}
			}
			mu.Lock()
			if !strings.HasPrefix(hooks[0], "/webhooks/gateway evt_") {
				t.Errorf("webhook went to %q, want /webhooks/gateway with an event id", hooks[0])
			}
			mu.Unlock()
			stop()

			base, stop = startRun(t, env)
			defer stop()
			ledgerReq, _ := http.NewRequest(http.MethodGet, base+"/_control/ledger", nil)
			ledgerReq.Header.Set("Authorization", "Bearer "+fakegateway.DemoControlToken)
			resp, err = http.DefaultClient.Do(ledgerReq)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var ledger struct {
				Charges []struct {
					IdempotencyKey string `json:"idempotency_key"`
				} `json:"charges"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&ledger); err != nil {
				t.Fatal(err)
			}
			if len(ledger.Charges) != 1 || ledger.Charges[0].IdempotencyKey != "run-1" {
				t.Errorf("ledger after restart: got %+v, want the one charge", ledger.Charges)
			}
			jar, _ := cookiejar.New(nil)
			browser := &http.Client{Jar: jar}                                          // follows the login's redirect with its cookie
			page, err := browser.Get(base + "/?token=" + fakegateway.DemoControlToken) // the logged login link
			if err != nil {
				t.Fatal(err)
			}
			page.Body.Close()
			if page.StatusCode != http.StatusOK {
				t.Errorf("page: got %d, want 200", page.StatusCode)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	t.Run("Defaults", func(t *testing.T) {
		cfg, err := loadConfig(nil, func(string) string { return "" }, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Addr != "127.0.0.1:8081" || cfg.DataDir != "./data" || cfg.DatabaseURL != "" ||
			cfg.WebhookURL != "http://127.0.0.1:8080/webhooks/gateway" || cfg.WebhookSecret != "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" ||
			cfg.ControlToken != fakegateway.DemoControlToken {
			t.Errorf("got %+v", cfg)
		}
	})
	t.Run("ControlToken", func(t *testing.T) {
		cfg, _ := loadConfig(nil, func(k string) string {
			return map[string]string{"GATEWAY_CONTROL_TOKEN": " my-own-control-token-42 "}[k]
		}, &bytes.Buffer{})
		if cfg.ControlToken != "my-own-control-token-42" {
			t.Errorf("got %q, want my-own-control-token-42", cfg.ControlToken)
		}
	})
	t.Run("ShopAddr", func(t *testing.T) {
		cfg, _ := loadConfig(nil, func(k string) string {
			return map[string]string{"SHOP_ADDR": "0.0.0.0:9000"}[k]
		}, &bytes.Buffer{})
		if cfg.WebhookURL != "http://0.0.0.0:9000/webhooks/gateway" {
			t.Errorf("got %q", cfg.WebhookURL)
		}
	})
	t.Run("Flags", func(t *testing.T) {
		cfg, err := loadConfig([]string{"-addr", "127.0.0.1:9999", "-data-dir", "/tmp/x"}, func(string) string { return "" }, &bytes.Buffer{})
		if err != nil || cfg.Addr != "127.0.0.1:9999" || cfg.DataDir != "/tmp/x" {
			t.Errorf("got %+v %v", cfg, err)
		}
	})
	for name, env := range map[string]map[string]string{
		"ErrShopURL": {"SHOP_PUBLIC_URL": "shop.example"},
		"ErrAddr":    {"GATEWAY_ADDR": "8081"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := loadConfig(nil, func(k string) string { return env[k] }, &bytes.Buffer{}); err == nil {
				t.Error("got nil, want an error")
			}
		})
	}
	for name, env := range map[string]map[string]string{
		"ErrDatabaseURL": {"DATABASE_URL": "mysql://x", "GATEWAY_ADDR": "127.0.0.1:0"},
		"ErrSecret":      {"WEBHOOK_SECRET": "not base64!", "GATEWAY_ADDR": "127.0.0.1:0"},
		"ErrShortToken":  {"GATEWAY_CONTROL_TOKEN": "letmein", "GATEWAY_ADDR": "127.0.0.1:0"},
	} {
		t.Run(name, func(t *testing.T) {
			env["DATA_DIR"] = t.TempDir()
			if err := run(context.Background(), nil, func(k string) string { return env[k] }, &bytes.Buffer{}); err == nil {
				t.Error("got nil, want an error")
			}
		})
	}
}

// The standalone gateway always guards its control API: with no GATEWAY_CONTROL_TOKEN it uses
// the demo value and says so loudly; with a token of the operator's own it enforces that one
// and never writes it to the log.
func TestRunControlToken(t *testing.T) {
	get := func(t *testing.T, url, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	t.Run("DemoTokenWarns", func(t *testing.T) {
		base, out, stop := startRunOutput(t, map[string]string{"GATEWAY_ADDR": "127.0.0.1:0", "DATA_DIR": t.TempDir()})
		defer stop()
		if got := get(t, base+"/_control/faults", ""); got != http.StatusUnauthorized {
			t.Errorf("without a token: got %d, want 401", got)
		}
		if got := get(t, base+"/_control/faults", fakegateway.DemoControlToken); got != http.StatusOK {
			t.Errorf("with the demo token: got %d, want 200", got)
		}
		log := out.String()
		if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "DEMO CONTROL TOKEN IN USE") {
			t.Errorf("no warning about the demo control token in:\n%s", log)
		}
		if !strings.Contains(log, base+"/?token="+fakegateway.DemoControlToken) {
			t.Errorf("no login link in:\n%s", log)
		}
		if !strings.Contains(log, "DEMO WEBHOOK SECRET IN USE") {
			t.Errorf("no warning about the demo webhook secret in:\n%s", log)
		}
	})
	t.Run("OwnTokenEnforcedNotLogged", func(t *testing.T) {
		const token = "operators-own-token-5f2d9a"
		base, out, stop := startRunOutput(t, map[string]string{"GATEWAY_ADDR": "127.0.0.1:0", "DATA_DIR": t.TempDir(),
			"GATEWAY_CONTROL_TOKEN": token, "WEBHOOK_SECRET": "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"})
		defer stop()
		if got := get(t, base+"/_control/faults", fakegateway.DemoControlToken); got != http.StatusUnauthorized {
			t.Errorf("with the demo token: got %d, want 401", got)
		}
		if got := get(t, base+"/_control/faults", token); got != http.StatusOK {
			t.Errorf("with the own token: got %d, want 200", got)
		}
		if got := get(t, base+"/healthz", ""); got != http.StatusOK {
			t.Errorf("healthz: got %d, want 200", got)
		}
		log := out.String()
		if strings.Contains(log, token) || strings.Contains(log, "DEMO") {
			t.Errorf("the log shows the token or a demo warning:\n%s", log)
		}
	})
}
