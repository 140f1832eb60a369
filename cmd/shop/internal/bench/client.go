package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// testCard always succeeds at the fake gateway.
const testCard = "4242424242424242"

// catalogue is what the benchmark's customers buy: one unit of a plentiful product, in turn
// across both demo tenants, so that concurrent orders do not all wait on one product's row.
var catalogue = []struct{ tenant, sku string }{
	{"acme", "trail-pack-30"}, {"globex", "espresso-beans"}, {"acme", "steel-bottle"},
	{"globex", "gooseneck-kettle"}, {"acme", "merino-beanie"}, {"globex", "ceramic-dripper"},
	{"acme", "camp-mug"}, {"globex", "paper-filters"}, {"acme", "headlamp"}, {"globex", "barista-apron"},
}

// Endpoints measured.
const (
	checkoutPath = "/api/v1/checkout"
	ordersPath   = "/api/v1/orders"
)

// newTransport is a keep-alive transport with room for clients connections to one host, so
// that no request of a measurement pays for a new TCP connection once the pool is warm.
func newTransport(clients int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 2*clients + 8
	t.MaxIdleConnsPerHost = 2*clients + 8
	t.MaxConnsPerHost = 0
	return t
}

// shopClient sends the benchmark's requests to one shop.
type shopClient struct {
	base    string
	apiKeys map[string]string // tenant → API key
	http    *http.Client
	seq     atomic.Int64 // picks the next product of the catalogue
}

func newShopClient(base string, apiKeys map[string]string, clients int) *shopClient {
	return &shopClient{base: base, apiKeys: apiKeys,
		http: &http.Client{Transport: newTransport(clients), Timeout: 60 * time.Second}}
}

func (c *shopClient) close() { c.http.CloseIdleConnections() }

// purchase is one request body with the tenant it is sent as.
type purchase struct {
	tenant string
	body   []byte
}

// nextPurchase is a body for path (checkout carries the card), buying the catalogue's next
// product.
func (c *shopClient) nextPurchase(path string) purchase {
	item := catalogue[int(c.seq.Add(1))%len(catalogue)]
	body := map[string]any{
		"items": []map[string]any{{"sku": item.sku, "quantity": 1}},
		"email": "bench@example.com",
		"shipping_address": map[string]string{"name": "Ada Lovelace", "address": "1 Analytical Way",
			"city": "London", "postal_code": "N1 9GU", "country": "GB"},
	}
	if path == checkoutPath {
		body["card_number"] = testCard
	}
	b, _ := json.Marshal(body)
	return purchase{tenant: item.tenant, body: b}
}

// answer is what one request came to.
type answer struct {
	status     int
	replayed   bool   // Idempotent-Replayed: true
	retryAfter string // the Retry-After header, if any
	latency    time.Duration
	err        error
}

// post sends one POST to path with key and extra headers. It makes exactly one attempt:
// Go's transport re-sends by itself a request that carries an Idempotency-Key when the
// connection dies before an answer, if it can rewind the body (GetBody). A benchmark must
// count what it sent, and the 20-on-one-key step must see each attempt's own answer, so
// GetBody is removed and the transport cannot resend.
func (c *shopClient) post(ctx context.Context, path string, p purchase, key string, header http.Header) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(p.body))
	if err != nil {
		return answer{err: err}
	}
	req.GetBody = nil // exactly one attempt per request (see above)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.apiKeys[p.tenant])
	req.Header.Set("Idempotency-Key", key)
	for k, v := range header {
		req.Header[k] = v
	}
	began := time.Now()
	res, err := c.http.Do(req)
	if err != nil {
		return answer{err: err, latency: time.Since(began)}
	}
	// Read the whole body before stopping the clock, and so the connection is reused.
	_, err = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return answer{status: res.StatusCode, replayed: res.Header.Get("Idempotent-Replayed") == "true",
		retryAfter: res.Header.Get("Retry-After"), latency: time.Since(began), err: err}
}

// newKey is a fresh idempotency key.
func newKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "bench-" + hex.EncodeToString(b[:])
}

// load is what a measurement of one kind of request came to.
type load struct {
	Requests   int
	Unexpected int // answers other than the expected one, and transport errors
	FirstError string
	Elapsed    time.Duration
	latencies  []time.Duration // of the expected answers
}

// Throughput is expected answers per second.
func (l load) Throughput() float64 {
	if l.Elapsed <= 0 {
		return 0
	}
	return float64(len(l.latencies)) / l.Elapsed.Seconds()
}

func (l load) P50() float64 { return percentile(l.latencies, 50) }
func (l load) P99() float64 { return percentile(l.latencies, 99) }

// request makes one request of a measurement and says whether its answer is the expected one.
type request func(ctx context.Context) answer

// runLoad sends requests from clients goroutines, each one after the other, for d; every
// request started before the end is waited for and counted.
func runLoad(ctx context.Context, clients int, d time.Duration, do request, expected func(answer) bool) load {
	var (
		mu   sync.Mutex
		res  load
		wg   sync.WaitGroup
		stop = time.Now().Add(d)
	)
	began := time.Now()
	for range clients {
		wg.Go(func() {
			var mine []time.Duration
			var unexpected int
			var firstErr string
			for time.Now().Before(stop) && ctx.Err() == nil {
				a := do(ctx)
				if expected(a) {
					mine = append(mine, a.latency)
					continue
				}
				unexpected++
				if firstErr == "" {
					firstErr = describe(a)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.latencies = append(res.latencies, mine...)
			res.Unexpected += unexpected
			if res.FirstError == "" {
				res.FirstError = firstErr
			}
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(began)
	res.Requests = len(res.latencies) + res.Unexpected
	return res
}

// describe names an unexpected answer for the report.
func describe(a answer) string {
	if a.err != nil {
		return a.err.Error()
	}
	return fmt.Sprintf("HTTP %d (replayed %v)", a.status, a.replayed)
}

// created is the expected answer to a new key: 201, not a replay.
func created(a answer) bool { return a.err == nil && a.status == http.StatusCreated && !a.replayed }

// replayed is the expected answer to a completed key: its stored 201, marked as a replay.
func replayed(a answer) bool { return a.err == nil && a.status == http.StatusCreated && a.replayed }
