package labrun

// What a client sends to a shop and its fake gateway, and how it reads the answers: the
// lab's client plays scenarios with these, and cmd/shop's end-to-end tests drive their
// stacks with the same ones.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"checkoutlab/payments/lab"
)

// Answer is what one request got: an HTTP answer, decoded, or Err for none (a lost
// connection, a timeout).
type Answer struct {
	Status     int
	Body       map[string]any // the JSON answer; nil if it was not JSON
	Raw        []byte
	Replayed   bool          // the shop replayed a stored answer (Idempotent-Replayed: true)
	RetryAfter time.Duration // how long the shop asked the client to wait (Retry-After)
	Err        error
}

// Final reports whether a careful client stops retrying after a: on any answer below 500,
// except a 409 saying that the key's request is still being worked on or lost its lease. A
// lost answer, a 5xx and those two 409s are retried, with the same key. A business conflict
// (out of stock, already paid) is final.
func (a Answer) Final() bool {
	if a.Err != nil || a.Status >= 500 {
		return false
	}
	code, _ := a.Body["error"].(string)
	return a.Status != http.StatusConflict || code != "idempotency_request_in_progress" && code != "idempotency_lease_lost"
}

// OrderID is the order an answer names: a checkout's "order", or the "order_id" of an
// answer about an order (a declined payment, say). It is "" if the answer names none.
func (a Answer) OrderID() string {
	if o, ok := a.Body["order"].(map[string]any); ok {
		id, _ := o["id"].(string)
		return id
	}
	id, _ := a.Body["order_id"].(string)
	return id
}

// readAnswer reads res into an Answer.
func readAnswer(res *http.Response) Answer {
	a := Answer{Status: res.StatusCode, Replayed: res.Header.Get("Idempotent-Replayed") == "true"}
	a.Raw, _ = io.ReadAll(res.Body) // a cut-off body is still the answer its status gives
	_ = json.Unmarshal(a.Raw, &a.Body)
	if secs, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil {
		a.RetryAfter = time.Duration(secs) * time.Second
	}
	return a
}

// Post sends body as JSON to url with apiKey as its Bearer token and key as its
// Idempotency-Key ("" sends none) with Prefer: wait=2, and reads the answer. It makes exactly
// one attempt.
func Post(ctx context.Context, client *http.Client, url, apiKey, key string, body []byte) Answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Answer{Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Prefer", PreferWait)
	}
	oneAttempt(req)
	res, err := client.Do(req)
	if err != nil {
		return Answer{Err: err} // a lost answer, for the client
	}
	defer res.Body.Close()
	return readAnswer(res)
}

// PreferWait is the Prefer header every request of the lab's clients (and the chaos customers,
// which post through Post) sends with its key, as checkout.js does: a request that finds its
// key in progress is held up to 2 s for the first one's answer instead of a 409 at once.
const PreferWait = "wait=2"

// oneAttempt stops net/http from sending req again by itself. Its transport resends a
// request that carries an Idempotency-Key when a reused connection dies before the answer —
// exactly what a crash point does — and the resent request would then wait for the
// restarted shop on the listener the lab keeps open. The lab's client decides itself when to
// retry, and counts every attempt it makes.
func oneAttempt(req *http.Request) { req.GetBody = nil }

// CheckoutBody is the JSON body of a one-step checkout (POST /api/v1/checkout) of ch's cart,
// paid with ch's card, for the customer email.
func CheckoutBody(ch lab.Checkout, email string) []byte {
	b, _ := json.Marshal(map[string]any{
		"items": items(ch),
		"email": email,
		"shipping_address": map[string]string{"name": "Ada Lovelace", "address": "1 Analytical Way",
			"city": "London", "postal_code": "N1 9GU", "country": "GB"},
		"card_number": card(ch),
	})
	return b
}

// items is the cart a checkout step buys: two camp mugs unless ch.Cart names another.
func items(ch lab.Checkout) []map[string]any {
	switch ch.Cart {
	case "compass":
		return []map[string]any{{"sku": "brass-compass", "quantity": 1}}
	case "beans":
		return []map[string]any{{"sku": "espresso-beans", "quantity": 1}}
	}
	return []map[string]any{{"sku": "camp-mug", "quantity": 2}}
}

// card is the card a checkout step pays with: 4242 4242 4242 4242 unless ch.Card is set.
func card(ch lab.Checkout) string {
	if ch.Card == "" {
		return "4242424242424242"
	}
	return ch.Card
}

// Charge is an entry of the gateway's ledger.
type Charge = lab.Charge

// Ledger reads the gateway's ledger (GET /_control/ledger, with the gateway's control token):
// every charge, whatever its status.
func Ledger(ctx context.Context, client *http.Client, gatewayURL, controlToken string) ([]Charge, error) {
	var ledger struct{ Charges []Charge }
	if err := getJSON(ctx, client, gatewayURL+"/_control/ledger", controlToken, &ledger); err != nil {
		return nil, fmt.Errorf("read the gateway ledger: %w", err)
	}
	return ledger.Charges, nil
}

// Deliveries reads the gateway's webhook delivery log (GET /_control/deliveries, with the
// gateway's control token), newest first.
func Deliveries(ctx context.Context, client *http.Client, gatewayURL, controlToken string) ([]lab.Delivery, error) {
	var d struct{ Deliveries []lab.Delivery }
	if err := getJSON(ctx, client, gatewayURL+"/_control/deliveries", controlToken, &d); err != nil {
		return nil, fmt.Errorf("read the gateway's deliveries: %w", err)
	}
	return d.Deliveries, nil
}

// ArmFault arms a fault on the gateway (POST /_control/faults, with the gateway's control
// token); fault is its JSON, e.g. map[string]any{"fault": "commit_then_drop"}.
func ArmFault(ctx context.Context, client *http.Client, gatewayURL, controlToken string, fault any) error {
	b, err := json.Marshal(fault)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, gatewayURL+"/_control/faults", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if controlToken != "" {
		req.Header.Set("Authorization", "Bearer "+controlToken)
	}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("arm fault: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		body, _ := io.ReadAll(res.Body)
		return fmt.Errorf("arm fault %v: %d %s", fault, res.StatusCode, body)
	}
	return nil
}

// getJSON GETs url (with token as its Bearer token, if set: a tenant's API key for the shop,
// the control token for the gateway) and decodes a 200 answer into v.
func getJSON(ctx context.Context, client *http.Client, url, token string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", url, res.StatusCode)
	}
	return json.NewDecoder(res.Body).Decode(v)
}
