package chaos

// A chaos run's customer: it retries as static/js/checkout.js does — the same key on every
// attempt, a client timeout per attempt, exponential backoff with full jitter, Retry-After as
// a floor, and at most eight attempts before it gives up (the browser would then hand over
// to a page that keeps checking; the shop must still finish the purchase on its own).

import (
	"checkoutlab/payments/lab"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"checkoutlab/cmd/shop/internal/labrun"
)

// The tuning of checkout.js.
const (
	clientTimeout = 15 * time.Second
	firstBackoff  = 400 * time.Millisecond
	maxBackoff    = 5 * time.Second
	maxAttempts   = 8
)

// outcome is what one purchase came to.
type outcome struct {
	Index    int
	Email    string
	Outcome  string
	Attempts int
	Orders   map[string]bool // every order id an answer named
	Keys     map[string]bool // every key sent
	Done     time.Duration   // since the run began
}

// customer makes purchases against the load balancer at shop.
type customer struct {
	shop    string
	apiKeys map[string]string
	http    *http.Client
	runID   string
	sameKey bool
	began   time.Time
}

func (c *customer) email(i int) string { return fmt.Sprintf("chaos+%s-%d@example.com", c.runID, i) }

// buy makes purchase p, its copies at once, and returns what came of it. rng gives the
// backoff's jitter.
func (c *customer) buy(ctx context.Context, p Purchase, rng *rand.Rand) outcome {
	o := outcome{Index: p.Index, Email: c.email(p.Index), Orders: map[string]bool{}, Keys: map[string]bool{}}
	body, _ := json.Marshal(map[string]any{
		"items": p.Lines,
		"email": o.Email,
		"shipping_address": map[string]string{"name": "Ada Lovelace", "address": "1 Analytical Way",
			"city": "London", "postal_code": "N1 9GU", "country": "GB"},
		"card_number": p.Card,
	})
	var mu sync.Mutex
	var wg sync.WaitGroup
	jitter := make([]*rand.Rand, p.Copies)
	for i := range jitter {
		jitter[i] = rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))
	}
	for copy := range p.Copies {
		wg.Go(func() {
			got, attempts := c.attempts(ctx, p, copy, body, jitter[copy], func(key string, a labrun.Answer) {
				mu.Lock()
				defer mu.Unlock()
				o.Keys[key] = true
				if id := a.OrderID(); id != "" && a.Err == nil && (a.Status < 300 || a.Status == http.StatusPaymentRequired) {
					o.Orders[id] = true
				}
			})
			mu.Lock()
			defer mu.Unlock()
			o.Attempts += attempts
			// The purchase's outcome is the best one any copy saw: a paid copy is a paid purchase.
			if rank(got) > rank(o.Outcome) {
				o.Outcome = got
			}
		})
	}
	wg.Wait()
	o.Done = time.Since(c.began)
	return o
}

func rank(outcome string) int {
	switch outcome {
	case lab.ChaosOutcomePaid:
		return 4
	case lab.ChaosOutcomeDeclined:
		return 3
	case lab.ChaosOutcomeRejected:
		return 2
	case lab.ChaosOutcomeGaveUp:
		return 1
	}
	return 0
}

// attempts sends one copy of a purchase until a final answer or maxAttempts, and returns its
// outcome and how many attempts it made; seen sees every answer.
func (c *customer) attempts(ctx context.Context, p Purchase, copy int, body []byte, rng *rand.Rand, seen func(string, labrun.Answer)) (string, int) {
	key := fmt.Sprintf("%s-%d", c.runID, p.Index)
	for n := 1; n <= maxAttempts && ctx.Err() == nil; n++ {
		a := labrun.Post(ctx, c.http, c.shop+"/api/v1/checkout", c.apiKeys[p.Tenant], key, body)
		seen(key, a)
		if a.Final() {
			switch {
			case a.Status == http.StatusCreated:
				return lab.ChaosOutcomePaid, n
			case a.Status == http.StatusPaymentRequired:
				return lab.ChaosOutcomeDeclined, n
			}
			return lab.ChaosOutcomeRejected, n
		}
		if n == maxAttempts {
			break
		}
		ceiling := min(maxBackoff, firstBackoff<<(n-1))
		wait := max(ceiling/2+time.Duration(rng.Int64N(int64(ceiling/2))), a.RetryAfter)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		if !c.sameKey {
			key = fmt.Sprintf("%s-%d-copy%d-retry%d", c.runID, p.Index, copy, n) // the client's bug
		}
	}
	return lab.ChaosOutcomeGaveUp, maxAttempts
}
