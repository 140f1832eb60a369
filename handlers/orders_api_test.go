package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"checkoutlab/handlers"
	"checkoutlab/handlers/idempotency"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// testAPI is the real router with the orders API and its ops views mounted as cmd/shop mounts
// them, on a seeded database.
type testAPI struct {
	e      *echo.Echo
	db     *gorm.DB
	orders *handlers.OrdersAPI
	keys   *models.IdempotencyStore
	reg    *prometheus.Registry
}

// MustAPI builds the router on db with the given lease. Requests that carry a browser session
// cookie besides the API key get the session as their principal: "another principal of the
// same tenant".
func MustAPI(tb testing.TB, db *gorm.DB, lease time.Duration) *testAPI {
	tb.Helper()
	modelstest.MustSeed(tb, db)
	reg := prometheus.NewRegistry()
	e := handlers.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	keys := models.NewIdempotencyStore(db)
	api := &handlers.OrdersAPI{Orders: models.NewOrderStore(db),
		Idempotency: MustIdempotency(keys, lease, idempotency.NewMetrics(reg), nil)}
	sessionIfCookie := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if _, err := c.Cookie(handlers.SessionCookie); err == nil {
				return handlers.SessionMiddleware()(next)(c)
			}
			return next(c)
		}
	}
	g := e.Group("/api/v1", handlers.APIKeyAuth(models.NewTenantStore(db)), sessionIfCookie)
	api.Routes(g)
	(&handlers.OrdersOpsAPI{Orders: models.NewOrderStore(db), Effects: models.NewSideEffectStore(db),
		Journal: models.NewJournalStore(db, nil)}).Routes(g)
	return &testAPI{e: e, db: db, orders: api, keys: keys, reg: reg}
}

// MustIdempotency is the idempotency middleware as cmd/shop wires it, on store.
func MustIdempotency(store idempotency.Store, lease time.Duration, metrics *idempotency.Metrics, journal idempotency.Journal) *idempotency.Middleware {
	return &idempotency.Middleware{Store: store, Lease: lease, Scope: handlers.KeyScope,
		RenderError: handlers.ErrorResponse, Metrics: metrics, Journal: journal}
}

// request describes one API call.
type request struct {
	apiKey  string // default sk_test_acme
	key     string // Idempotency-Key; "-" sends none
	body    string
	session string // a browser session id, sent as a cookie
}

func (a *testAPI) post(tb testing.TB, r request) *httptest.ResponseRecorder {
	tb.Helper()
	req := httptest.NewRequest(http.MethodPost, "/api/v1/orders", strings.NewReader(r.body))
	req.Header.Set("Content-Type", "application/json")
	if r.apiKey == "" {
		r.apiKey = "sk_test_acme"
	}
	req.Header.Set("Authorization", "Bearer "+r.apiKey)
	if r.key != "-" {
		req.Header.Set(idempotency.HeaderKey, r.key)
	}
	if r.session != "" {
		req.AddCookie(&http.Cookie{Name: handlers.SessionCookie, Value: r.session})
	}
	rec := httptest.NewRecorder()
	a.e.ServeHTTP(rec, req)
	return rec
}

func (a *testAPI) get(tb testing.TB, apiKey, path string) *httptest.ResponseRecorder {
	tb.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	rec := httptest.NewRecorder()
	a.e.ServeHTTP(rec, req)
	return rec
}

// MustStatus fails unless rec has status want and, if code is set, error code code.
func MustStatus(tb testing.TB, rec *httptest.ResponseRecorder, want int, code string) {
	tb.Helper()
	if rec.Code != want {
		tb.Fatalf("status: got %d, want %d (body %s)", rec.Code, want, rec.Body)
	}
	if code != "" {
		if got := errorCode(rec); got != code {
			tb.Fatalf("error: got %q, want %q (body %s)", got, code, rec.Body)
		}
	}
}

func errorCode(rec *httptest.ResponseRecorder) string {
	var e struct{ Error string }
	_ = json.Unmarshal(rec.Body.Bytes(), &e)
	return e.Error
}

// MustCountOrders fails unless the database holds want orders.
func MustCountOrders(tb testing.TB, db *gorm.DB, want int64) {
	tb.Helper()
	var n int64
	if err := db.Model(&models.Order{}).Count(&n).Error; err != nil {
		tb.Fatal(err)
	}
	if n != want {
		tb.Fatalf("orders: got %d, want %d", n, want)
	}
}

// MustSameAnswer fails unless replay repeats first byte for byte, marked as a replay.
func MustSameAnswer(tb testing.TB, first, replay *httptest.ResponseRecorder) {
	tb.Helper()
	if replay.Code != first.Code || replay.Body.String() != first.Body.String() {
		tb.Fatalf("replay: got %d %s, want %d %s", replay.Code, replay.Body, first.Code, first.Body)
	}
	for _, h := range []string{"Content-Type", "Location"} {
		if got, want := replay.Header().Get(h), first.Header().Get(h); got != want {
			tb.Fatalf("replay %s: got %q, want %q", h, got, want)
		}
	}
	if got := replay.Header().Get(idempotency.HeaderReplayed); got != "true" {
		tb.Fatalf("Idempotent-Replayed: got %q, want true", got)
	}
	if first.Header().Get(idempotency.HeaderReplayed) != "" {
		tb.Fatalf("first answer is marked as a replay")
	}
}

const orderBody = `{"items":[{"sku":"camp-mug","quantity":2},{"sku":"headlamp","quantity":1}],` +
	`"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","address":"1 Analytical Way",` +
	`"city":"London","postal_code":"N1 9GU","country":"GB"}}`

// The same order: members reordered, items reordered, numbers spelled otherwise, white space,
// lower-case country, and free metadata.
const orderBodyRespelled = `{ "metadata": {"note": "gift"},
	"shipping_address": {"country": "gb", "postal_code": "N1 9GU", "city": "London", "address": "1 Analytical Way", "name": "Ada Lovelace"},
	"email": "ada@example.com",
	"items": [ {"quantity": 1.0, "sku": "headlamp"}, {"sku": "camp-mug", "quantity": 2e0} ] }`

func TestOrdersIdempotency(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		a := MustAPI(t, db, 5*time.Second)

		t.Run("CreatedThenReplayed", func(t *testing.T) {
			first := a.post(t, request{key: "order-1", body: orderBody})
			MustStatus(t, first, http.StatusCreated, "")
			var o handlers.OrderJSON
			if err := json.Unmarshal(first.Body.Bytes(), &o); err != nil {
				t.Fatal(err)
			}
			if o.Status != "pending_payment" || o.Amount != 2*1400+3900 || o.Currency != "USD" || len(o.Items) != 2 {
				t.Errorf("got %+v, want a pending USD order of 6700 with 2 items", o)
			}
			if got, want := first.Header().Get("Location"), "/api/v1/orders/"+o.ID; got != want {
				t.Errorf("Location: got %q, want %q", got, want)
			}
			if got := first.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type: got %q, want application/json", got)
			}
			MustSameAnswer(t, first, a.post(t, request{key: "order-1", body: orderBody}))
			MustSameAnswer(t, first, a.post(t, request{key: "order-1", body: orderBodyRespelled}))
			MustCountOrders(t, db, 1)
			k, err := a.keys.Get(context.Background(), "acme", "order-1")
			if err != nil || k.State != models.KeyCompleted || k.OrderID == nil || *k.OrderID != o.ID {
				t.Errorf("key: got %+v, %v, want completed and linked to %s", k, err, o.ID)
			}

			got := a.get(t, "sk_test_acme", "/api/v1/orders/"+o.ID)
			MustStatus(t, got, http.StatusOK, "")
			if got.Body.String() != first.Body.String() {
				t.Errorf("GET: got %s, want %s", got.Body, first.Body)
			}
			MustStatus(t, a.get(t, "sk_test_globex", "/api/v1/orders/"+o.ID), http.StatusNotFound, "not_found")
		})
		t.Run("ErrKeyReuseChangedQuantity", func(t *testing.T) {
			MustStatus(t, a.post(t, request{key: "order-2", body: orderBody}), http.StatusCreated, "")
			changed := strings.Replace(orderBody, `"quantity":2`, `"quantity":3`, 1)
			rec := a.post(t, request{key: "order-2", body: changed})
			MustStatus(t, rec, http.StatusUnprocessableEntity, "idempotency_key_reuse")
			if strings.Contains(rec.Body.String(), "ord_") || rec.Header().Get("Location") != "" {
				t.Errorf("422 reveals the original: %s %v", rec.Body, rec.Header())
			}
		})
		t.Run("ErrKeyReuseOtherPrincipal", func(t *testing.T) {
			MustStatus(t, a.post(t, request{key: "order-3", body: orderBody}), http.StatusCreated, "")
			rec := a.post(t, request{key: "order-3", body: orderBody, session: strings.Repeat("ab", 16)})
			MustStatus(t, rec, http.StatusUnprocessableEntity, "idempotency_key_reuse")
		})
		t.Run("OtherTenantIsSeparate", func(t *testing.T) {
			acme := a.post(t, request{key: "shared-key", body: orderBody})
			MustStatus(t, acme, http.StatusCreated, "")
			globexBody := strings.NewReplacer("camp-mug", "paper-filters", "headlamp", "ceramic-dripper").Replace(orderBody)
			globex := a.post(t, request{apiKey: "sk_test_globex", key: "shared-key", body: globexBody})
			MustStatus(t, globex, http.StatusCreated, "")
			if globex.Header().Get(idempotency.HeaderReplayed) != "" || globex.Body.String() == acme.Body.String() {
				t.Errorf("globex got acme's answer: %s", globex.Body)
			}
			if !strings.Contains(globex.Body.String(), `"currency":"EUR"`) {
				t.Errorf("got %s, want a EUR order", globex.Body)
			}
		})
		t.Run("ValidationErrorThenCorrected", func(t *testing.T) {
			bad := strings.Replace(orderBody, `"quantity":2`, `"quantity":0`, 1)
			MustStatus(t, a.post(t, request{key: "order-4", body: bad}), http.StatusBadRequest, "invalid_request")
			unknown := strings.Replace(orderBody, "camp-mug", "no-such-thing", 1)
			MustStatus(t, a.post(t, request{key: "order-4", body: unknown}), http.StatusNotFound, "unknown_product")
			MustStatus(t, a.post(t, request{key: "order-4", body: `{"items":`}), http.StatusBadRequest, "invalid_json")
			MustStatus(t, a.post(t, request{key: "order-4", body: `[1,2]`}), http.StatusBadRequest, "invalid_request")
			MustStatus(t, a.post(t, request{key: "order-4", body: orderBody}), http.StatusCreated, "")
		})
		t.Run("OutOfStockStoredAndReplayed", func(t *testing.T) {
			body := `{"items":[{"sku":"brass-compass","quantity":6}],"email":"ada@example.com",` +
				`"shipping_address":{"name":"Ada","address":"1 Way","city":"London","postal_code":"N1","country":"GB"}}`
			first := a.post(t, request{key: "compass", body: body})
			MustStatus(t, first, http.StatusConflict, "out_of_stock")
			MustSameAnswer(t, first, a.post(t, request{key: "compass", body: body}))
		})
		t.Run("InvalidKeys", func(t *testing.T) {
			before := countKeys(t, db)
			MustStatus(t, a.post(t, request{key: "-", body: orderBody}), http.StatusBadRequest, "idempotency_key_required")
			for name, key := range map[string]string{
				"Empty": "", "TooLong": strings.Repeat("k", 256), "Control": "key\x01", "NonASCII": "clé",
			} {
				t.Run(name, func(t *testing.T) {
					MustStatus(t, a.post(t, request{key: key, body: orderBody}), http.StatusBadRequest, "invalid_idempotency_key")
				})
			}
			if got := countKeys(t, db); got != before {
				t.Errorf("keys: got %d, want %d (invalid requests reserve nothing)", got, before)
			}
			MustStatus(t, a.post(t, request{key: strings.Repeat("k", 255), body: orderBody}), http.StatusCreated, "")
		})
		t.Run("Metrics", func(t *testing.T) {
			for outcome, atLeast := range map[string]float64{"created": 5, "replayed": 3, "mismatch": 2, "deleted": 2} {
				if got := counterValue(t, a.reg, "checkoutlab_idempotency_outcomes_total", outcome); got < atLeast {
					t.Errorf("%s: got %v, want at least %v", outcome, got, atLeast)
				}
			}
		})
	})
}

func countKeys(tb testing.TB, db *gorm.DB) int64 {
	tb.Helper()
	var n int64
	if err := db.Model(&models.IdempotencyRecord{}).Count(&n).Error; err != nil {
		tb.Fatal(err)
	}
	return n
}

func counterValue(tb testing.TB, reg *prometheus.Registry, name, outcome string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestOrdersConcurrentSameKey: twenty requests with one fresh key at once, each retrying on 409
// as a client should. The key is only read before the handler runs and inserted by the
// order's own transaction, so several requests may start; the unique index lets exactly one
// commit. Exactly one order and one fresh 201; the nineteen others end with its replay.
func TestOrdersConcurrentSameKey(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		a := MustAPI(t, db, 5*time.Second)
		start := make(chan struct{})
		results := make(chan *httptest.ResponseRecorder, 20)
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for tries := 0; tries < 200; tries++ {
					rec := a.post(t, request{key: "crowd", body: orderBody})
					if rec.Code != http.StatusConflict {
						results <- rec
						return
					}
					if rec.Header().Get("Retry-After") == "" {
						t.Errorf("409 without Retry-After")
					}
					time.Sleep(5 * time.Millisecond)
				}
				t.Errorf("still 409 after 200 tries")
			}()
		}
		close(start)
		wg.Wait()
		close(results)
		fresh, replays := 0, 0
		for rec := range results {
			MustStatus(t, rec, http.StatusCreated, "")
			if rec.Header().Get(idempotency.HeaderReplayed) == "true" {
				replays++
			} else {
				fresh++
			}
		}
		if fresh != 1 || replays != 19 {
			t.Errorf("got %d fresh answers and %d replays, want 1 and 19", fresh, replays)
		}
		MustCountOrders(t, db, 1)
		if n := countKeys(t, db); n != 1 {
			t.Errorf("got %d keys, want 1", n)
		}
	})
}

// TestOrdersInfrastructureFailure: a panic or a database error inside the handler answers 5xx
// and releases the key, which then works for a retry.
func TestOrdersInfrastructureFailure(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		a := MustAPI(t, db, 5*time.Second)
		for name, hook := range map[string]func(context.Context) error{
			"Panic":         func(context.Context) error { panic("boom") },
			"DatabaseError": func(context.Context) error { return errors.New("insert order: driver: bad connection") },
			"Unavailable": func(context.Context) error {
				return &models.Error{Kind: models.KindUnavailable, Code: "service_unavailable", Message: "database down"}
			},
			// A slow failure: the key must still be released after a handler that ran longer
			// than the middleware's cleanup timeout (a regression: the timeout used to start
			// before the handler, so a slow gateway left the key locked for a whole lease).
			"SlowTimeout": func(context.Context) error {
				time.Sleep(5500 * time.Millisecond)
				return &models.Error{Kind: models.KindTimeout, Code: "payment_outcome_unknown", Message: "no answer in time"}
			},
		} {
			t.Run(name, func(t *testing.T) {
				key := "fail-" + name
				a.orders.BeforeCreate = hook
				rec := a.post(t, request{key: key, body: orderBody})
				if rec.Code < 500 {
					t.Fatalf("status: got %d, want 5xx (body %s)", rec.Code, rec.Body)
				}
				// The key of an order is written by the order's own transaction, which never
				// ran: no row, nothing to resume, and the retry places the order.
				if k, err := a.keys.Get(context.Background(), "acme", key); !errors.Is(err, models.ErrNotFound) {
					t.Fatalf("key after failure: got %+v, %v, want no row (nothing committed)", k, err)
				}
				a.orders.BeforeCreate = nil
				MustStatus(t, a.post(t, request{key: key, body: orderBody}), http.StatusCreated, "")
			})
		}
	})
}

// TestOrdersFencing: a request that stalls before its transaction (a GC pause, a stuck disk)
// while a retry with the same key places the order cannot create a second order: its key's
// INSERT loses on the unique index, its transaction rolls back, and it answers with the
// winner's answer, replayed.
func TestOrdersFencing(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		a := MustAPI(t, db, 3*time.Second)
		var winner *httptest.ResponseRecorder
		a.orders.BeforeCreate = func(ctx context.Context) error {
			a.orders.BeforeCreate = nil // only the first request stalls
			winner = a.post(t, request{key: "fenced", body: orderBody})
			return nil
		}
		stale := a.post(t, request{key: "fenced", body: orderBody})
		MustStatus(t, winner, http.StatusCreated, "")
		if winner.Header().Get(idempotency.HeaderReplayed) != "" {
			t.Errorf("the winner's answer is marked replayed")
		}
		MustSameAnswer(t, winner, stale)
		MustCountOrders(t, db, 1)
	})
}

// TestOrdersSlowOwnerKeepsNothing: a request that works slowly before its transaction holds
// no key row, so a retry meanwhile is not refused: it runs, and the unique index decides. The
// first to commit wins; the slow one ends with the winner's answer. One order either way.
// (A key that was written — a checkout past its first phase — is kept alive by its renewals;
// see TestSlowOwnerKeepsItsKey in handlers/idempotency.)
func TestOrdersSlowOwnerKeepsNothing(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		a := MustAPI(t, db, 150*time.Millisecond)
		entered, hold := make(chan struct{}), make(chan struct{})
		var once sync.Once
		a.orders.BeforeCreate = func(ctx context.Context) error {
			first := false
			once.Do(func() { first = true; close(entered) })
			if first {
				<-hold
			}
			return nil
		}
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- a.post(t, request{key: "slow", body: orderBody}) }()
		<-entered
		time.Sleep(500 * time.Millisecond) // more than three leases
		rec := a.post(t, request{key: "slow", body: orderBody})
		MustStatus(t, rec, http.StatusCreated, "")
		close(hold)
		slow := <-done
		MustSameAnswer(t, rec, slow)
		MustCountOrders(t, db, 1)
	})
}

// failingReserver is an idempotency store that cannot be reached.
type failingReserver struct{}

func (failingReserver) Reserve(context.Context, models.ReserveRequest) (*models.Reservation, error) {
	return nil, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
}

// TestOrdersStoreDown: without the key store the answer is 503 and the handler never runs.
func TestOrdersStoreDown(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		a := MustAPI(t, db, 5*time.Second)
		e := handlers.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
		(&handlers.OrdersAPI{Orders: models.NewOrderStore(db),
			Idempotency: MustIdempotency(failingReserver{}, time.Second, nil, nil),
			BeforeCreate: func(context.Context) error {
				t.Error("the handler ran without a reserved key")
				return nil
			},
		}).Routes(e.Group("/api/v1", handlers.APIKeyAuth(models.NewTenantStore(db))))
		a.e = e
		MustStatus(t, a.post(t, request{key: "down", body: orderBody}), http.StatusServiceUnavailable, "service_unavailable")
		MustCountOrders(t, db, 0)
	})
}

// TestOrdersClientGone: a client that disconnects mid-request leaves its key released, not
// stored; the retry places the order.
func TestOrdersClientGone(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		a := MustAPI(t, db, 5*time.Second)
		ctx, disconnect := context.WithCancel(context.Background())
		a.orders.BeforeCreate = func(context.Context) error {
			disconnect() // the client goes away while the handler works
			return nil
		}
		req := httptest.NewRequest(http.MethodPost, "/api/v1/orders", strings.NewReader(orderBody)).WithContext(ctx)
		req.Header.Set("Authorization", "Bearer sk_test_acme")
		req.Header.Set(idempotency.HeaderKey, "gone")
		a.e.ServeHTTP(httptest.NewRecorder(), req)

		// The order's transaction, which writes the key, never committed: no row.
		if k, err := a.keys.Get(context.Background(), "acme", "gone"); !errors.Is(err, models.ErrNotFound) {
			t.Fatalf("key: got %+v, %v, want no row (nothing committed)", k, err)
		}
		a.orders.BeforeCreate = nil
		MustStatus(t, a.post(t, request{key: "gone", body: orderBody}), http.StatusCreated, "")
		MustCountOrders(t, db, 1)
	})
}
