package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"gorm.io/gorm"

	"checkoutlab/models"
)

// fastEnv is the environment of a shop under test: short timeouts so failures resolve in a
// test's time, the same code paths as production.
var fastEnv = map[string]string{
	"GATEWAY_TIMEOUT":    "1s",
	"IDEMPOTENCY_LEASE":  "2s",
	"COMPLETER_INTERVAL": "200ms",
}

func withEnv(base map[string]string, extra map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// checkoutBody is a valid one-step checkout of two camp mugs with card.
func checkoutBody(card string) []byte {
	b, _ := json.Marshal(map[string]any{
		"items": []map[string]any{{"sku": "camp-mug", "quantity": 2}},
		"email": "ada@example.com",
		"shipping_address": map[string]string{"name": "Ada Lovelace", "address": "1 Analytical Way",
			"city": "London", "postal_code": "N1 9GU", "country": "GB"},
		"card_number": card,
	})
	return b
}

// Answer is an HTTP answer, decoded.
type Answer struct {
	Status   int
	Body     map[string]any
	Raw      []byte
	Replayed bool
	Err      error // transport error (no answer)
}

// MustPost sends a JSON POST with the acme API key and an idempotency key.
func post(base, path, key string, body []byte) Answer {
	req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk_test_acme")
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	res, err := client.Do(req)
	if err != nil {
		return Answer{Err: err}
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	a := Answer{Status: res.StatusCode, Raw: raw, Replayed: res.Header.Get("Idempotent-Replayed") == "true"}
	_ = json.Unmarshal(raw, &a.Body)
	return a
}

// retryUntilFinal retries a POST with the SAME key, as a careful client does, until it gets a
// final answer (2xx or 4xx other than 409), or gives up after attempts.
func retryUntilFinal(tb testing.TB, base, path, key string, body []byte, attempts int) (Answer, int) {
	tb.Helper()
	var a Answer
	for i := 1; i <= attempts; i++ {
		a = post(base, path, key, body)
		if a.Err == nil && a.Status < 500 && a.Status != http.StatusConflict {
			return a, i
		}
		if a.Err == nil && a.Status == http.StatusConflict && a.Body["error"] != "idempotency_request_in_progress" && a.Body["error"] != "idempotency_lease_lost" {
			return a, i // a business conflict (out of stock, already paid) is final
		}
		time.Sleep(300 * time.Millisecond)
	}
	tb.Fatalf("no final answer for key %s after %d attempts; last: %d %s %v", key, attempts, a.Status, a.Raw, a.Err)
	return a, attempts
}

// Charge is a gateway ledger entry, as much as the tests need.
type Charge struct {
	ID       string            `json:"id"`
	Status   string            `json:"status"`
	Amount   int64             `json:"amount"`
	Metadata map[string]string `json:"metadata"`
}

func mustLedger(tb testing.TB, gateway string) []Charge {
	tb.Helper()
	res, err := http.Get(gateway + "/_control/ledger")
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	var l struct{ Charges []Charge }
	if err := json.NewDecoder(res.Body).Decode(&l); err != nil {
		tb.Fatal(err)
	}
	return l.Charges
}

// succeededCharges counts the order's succeeded charges in the gateway ledger: money that moved.
func succeededCharges(tb testing.TB, gateway, orderID string) int {
	tb.Helper()
	n := 0
	for _, c := range mustLedger(tb, gateway) {
		if c.Metadata["order_id"] == orderID && c.Status == "succeeded" {
			n++
		}
	}
	return n
}

// armFault arms a gateway fault through its control API.
func armFault(tb testing.TB, gateway string, fault map[string]any) {
	tb.Helper()
	b, _ := json.Marshal(fault)
	res, err := http.Post(gateway+"/_control/faults", "application/json", bytes.NewReader(b))
	if err != nil {
		tb.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode >= 300 {
		tb.Fatalf("arm %v: %d %s", fault, res.StatusCode, body)
	}
}

// eventually polls cond until it holds or timeout passes.
func eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mustShopDB opens the shop's database beside the running shop, to check what it holds.
func mustShopDB(tb testing.TB, env map[string]string) *gorm.DB {
	tb.Helper()
	db, err := models.Open(context.Background(), env["DATABASE_URL"], env["DATA_DIR"], "shop.db")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { models.Close(db) })
	return db
}

// effectsOf counts the receipts and shipments of an order.
func effectsOf(tb testing.TB, db *gorm.DB, orderID string) (receipts, shipments int) {
	tb.Helper()
	r, s, err := models.NewSideEffectStore(db).CountByOrder(context.Background(), []string{orderID})
	if err != nil {
		tb.Fatal(err)
	}
	return r[orderID], s[orderID]
}

func orderIDOf(a Answer) string {
	if o, ok := a.Body["order"].(map[string]any); ok {
		return fmt.Sprint(o["id"])
	}
	if id, ok := a.Body["order_id"].(string); ok {
		return id
	}
	return ""
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// mustPage fetches an HTML page that must answer 200.
func mustPage(tb testing.TB, url string) *goquery.Document {
	tb.Helper()
	res, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: got %d, want 200", url, res.StatusCode)
	}
	doc, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return doc
}
