package fakegateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"checkoutlab/fakegateway"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
)

// waitFor is the generous upper bound for background work (webhook deliveries) in tests. It
// is a safety net for a hung test, not a performance assertion.
const waitFor = 15 * time.Second

// forEachDialect runs fn once per database dialect.
func forEachDialect(t *testing.T, fn func(t *testing.T, dialect string)) {
	t.Helper()
	for _, d := range modelstest.Dialects {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			fn(t, d)
		})
	}
}

// store is where one test's gateway database lives, so a test can open it again ("restart").
type store struct {
	url string // PostgreSQL database URL, or "" for SQLite
	dir string // SQLite data dir
}

func mustStore(tb testing.TB, dialect string) store {
	tb.Helper()
	s := store{url: modelstest.MustDatabaseURL(tb, dialect)}
	if s.url == "" {
		s.dir = tb.TempDir()
	}
	return s
}

func (s store) mustOpen(tb testing.TB) *gorm.DB {
	tb.Helper()
	db, err := fakegateway.OpenDB(context.Background(), s.url, s.dir)
	if err != nil {
		tb.Fatalf("open gateway db: %v", err)
	}
	tb.Cleanup(func() { _ = fakegateway.CloseDB(db) })
	return db
}

// receiver is a webhook endpoint that verifies every message with the shop's verifier and
// answers the status its script says (200 when the script is empty).
type receiver struct {
	srv      *httptest.Server
	verifier *payments.WebhookVerifier

	mu       sync.Mutex
	statuses []int // answers for the next requests, consumed in order
	got      []received
	rejected []error
	changed  chan struct{}
}

type received struct {
	ID        string
	Type      string
	Timestamp string
	Signature string
	Body      []byte
	Event     payments.GatewayEvent
}

func newReceiver(tb testing.TB, statuses ...int) *receiver {
	tb.Helper()
	v, err := payments.NewWebhookVerifier(fakegateway.DemoWebhookSecret)
	if err != nil {
		tb.Fatal(err)
	}
	r := &receiver{verifier: v, statuses: statuses, changed: make(chan struct{}, 1)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	tb.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer func() {
		r.mu.Unlock()
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}()
	if err := r.verifier.Verify(body, req.Header); err != nil {
		r.rejected = append(r.rejected, err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if len(r.statuses) > 0 {
		status := r.statuses[0]
		r.statuses = r.statuses[1:]
		if status >= 300 {
			w.WriteHeader(status)
			return
		}
	}
	var ev payments.GatewayEvent
	_ = json.Unmarshal(body, &ev)
	r.got = append(r.got, received{ID: req.Header.Get("webhook-id"), Type: ev.Type,
		Timestamp: req.Header.Get("webhook-timestamp"),
		Signature: req.Header.Get("webhook-signature"), Body: body, Event: ev})
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) URL() string { return r.srv.URL + "/webhooks/gateway" }

// waitForN waits until n messages were accepted and returns them.
func (r *receiver) waitForN(tb testing.TB, n int) []received {
	tb.Helper()
	deadline := time.After(waitFor)
	for {
		r.mu.Lock()
		got := append([]received(nil), r.got...)
		rejected := append([]error(nil), r.rejected...)
		r.mu.Unlock()
		if len(rejected) > 0 {
			tb.Fatalf("receiver rejected a webhook: %v", rejected)
		}
		if len(got) >= n {
			return got
		}
		select {
		case <-r.changed:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			tb.Fatalf("got %d webhooks, want %d", len(got), n)
		}
	}
}

// testGateway is a real gateway on a real listener with a real sender.
type testGateway struct {
	gw      *fakegateway.Gateway
	srv     *httptest.Server
	db      *gorm.DB
	store   store
	hooks   *receiver
	token   string   // Config.ControlToken; do sends it to /_control unless told otherwise
	browser *browser // an operator with the page open, for the page's forms
}

// testControlToken guards the control API of every test gateway unless openControl is given,
// so the tests exercise the gateway as cmd/fakegateway runs it.
const testControlToken = "test-control-token-0123456789"

type gwOption func(*fakegateway.Config)

func noSender(c *fakegateway.Config) { c.WebhookURL = "" }

// openControl runs the gateway without a control token, as the shop's in-process gateway may.
func openControl(c *fakegateway.Config) { c.ControlToken = "" }

// mustGateway starts a gateway on a fresh database of dialect (or on s when given).
func mustGateway(tb testing.TB, dialect string, opts ...gwOption) *testGateway {
	tb.Helper()
	return mustGatewayOn(tb, mustStore(tb, dialect), newReceiver(tb), opts...)
}

func mustGatewayOn(tb testing.TB, s store, hooks *receiver, opts ...gwOption) *testGateway {
	tb.Helper()
	db := s.mustOpen(tb)
	cfg := fakegateway.Config{
		DB:           db,
		WebhookURL:   hooks.URL(),
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		RetryBase:    10 * time.Millisecond,
		RetryMax:     50 * time.Millisecond,
		MaxAttempts:  10,
		PollInterval: 10 * time.Millisecond,
		ControlToken: testControlToken,
	}
	for _, o := range opts {
		o(&cfg)
	}
	gw, err := fakegateway.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); gw.Start(ctx) }()
	tb.Cleanup(func() {
		cancel()
		<-done
		_ = gw.Close()
		srv.CloseClientConnections()
		srv.Close()
	})
	g := &testGateway{gw: gw, srv: srv, db: db, store: s, hooks: hooks, token: cfg.ControlToken}
	g.browser = newBrowser(tb, g)
	return g
}

// response is a finished HTTP exchange.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) decode(tb testing.TB, v any) {
	tb.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		tb.Fatalf("decode %s: %v", r.Body, err)
	}
}

func (r response) errorCode(tb testing.TB) string {
	tb.Helper()
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	r.decode(tb, &e)
	if e.Message == "" {
		tb.Errorf("error %q has no message", e.Error)
	}
	return e.Error
}

// do sends one request on a fresh connection with no automatic retry, so a fault is seen as
// it happened. It returns the transport error instead of failing, for fault tests. A request
// to /_control carries the gateway's control token unless header sets Authorization (to ""
// for none).
func (g *testGateway) do(method, path string, body any, header map[string]string, timeout time.Duration) (response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, g.srv.URL+path, rd)
	if err != nil {
		return response{}, err
	}
	req.GetBody = nil // no transparent resend by net/http
	req.Header.Set("Content-Type", "application/json")
	if strings.HasPrefix(path, "/_control") && g.token != "" {
		req.Header.Set("Authorization", "Bearer "+g.token)
	}
	for k, v := range header {
		if k == "Authorization" && v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: raw}, nil
}

// mustDo is do that fails the test on a transport error.
func (g *testGateway) mustDo(tb testing.TB, method, path string, body any, header map[string]string) response {
	tb.Helper()
	r, err := g.do(method, path, body, header, waitFor)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func key(k string) map[string]string { return map[string]string{"Idempotency-Key": k} }

func chargeBody(amount int64, card string, order string) map[string]any {
	return map[string]any{"amount": amount, "currency": "EUR", "card_number": card,
		"metadata": map[string]string{"tenant": "acme", "order_id": order}}
}

// mustArm arms a fault and fails the test unless the gateway answers 201.
func (g *testGateway) mustArm(tb testing.TB, fault map[string]any) {
	tb.Helper()
	r := g.mustDo(tb, http.MethodPost, "/_control/faults", fault, nil)
	if r.Status != http.StatusCreated {
		tb.Fatalf("arm %v: got %d %s, want 201", fault, r.Status, r.Body)
	}
}

// ledger returns every charge in the ledger.
func (g *testGateway) ledger(tb testing.TB) []fakegateway.Charge {
	tb.Helper()
	var l fakegateway.Ledger
	g.mustDo(tb, http.MethodGet, "/_control/ledger", nil, nil).decode(tb, &l)
	return l.Charges
}

func (g *testGateway) deliveries(tb testing.TB) []fakegateway.Delivery {
	tb.Helper()
	var l fakegateway.DeliveryList
	g.mustDo(tb, http.MethodGet, "/_control/deliveries", nil, nil).decode(tb, &l)
	return l.Deliveries
}

const (
	cardOK           = "4242424242424242"
	cardDeclined     = "4000000000000002"
	cardInsufficient = "4000000000009995"
	cardDrop         = "4000000000000119"
	cardDelay        = "4000000000000259"
	cardErrorBefore  = "4000000000000341"
	cardDuplicate    = "4000000000000770"
	cardReorder      = "4000000000000788"
)
