package handlers_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"checkoutlab/handlers"
	"checkoutlab/handlers/idempotency"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
	"checkoutlab/static"
)

// testOpsPassword is the operator password of MustSecureShop.
const testOpsPassword = "correct horse battery staple"

// secureShop is the real router with everything a stranger can reach, wired as cmd/shop wires
// it: the storefront, the JSON API (orders, checkout, payments), the operator login guarding
// the operator routes (mailbox, reconciliation, lab, reset-demo), metrics and static files, on a seeded database, with a
// real fake gateway behind the payment operations.
type secureShop struct {
	srv    *httptest.Server
	db     *gorm.DB
	signer *handlers.Signer
	ops    *handlers.OpsAuth
}

// MustSecureShop builds the shop on db; opts are passed to NewRouter after WithSigner. The
// server is not started when unstarted is set (the caller tunes srv.Config, then Start).
func MustSecureShop(tb testing.TB, db *gorm.DB, unstarted bool, opts ...handlers.RouterOption) *secureShop {
	tb.Helper()
	modelstest.MustSeed(tb, db)
	reg := prometheus.NewRegistry()
	signer := handlers.NewRandomSigner()
	e := handlers.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), reg,
		append([]handlers.RouterOption{handlers.WithSigner(signer)}, opts...)...)
	ops := handlers.NewOpsAuth(testOpsPassword, signer)
	e.Use(ops.Guard(handlers.OperatorRoutes...))
	ops.Routes(e)

	tenants, orders, keys := models.NewTenantStore(db), models.NewOrderStore(db), models.NewIdempotencyStore(db)
	effects, journal := models.NewSideEffectStore(db), models.NewJournalStore(db, nil)
	cards := handlers.NewCardFingerprint([]byte("test shop secret, 32 bytes long!"))
	idem := MustIdempotency(keys, time.Minute, idempotency.NewMetrics(reg), journal)
	gateway := MustGatewayClient(tb)
	service := &payments.Service{DB: db, Gateway: gateway, Outbox: noOutbox{}, Render: handlers.RenderOperation, Journal: journal}

	e.StaticFS("/static", static.FS)
	(&handlers.Ops{Ping: func(context.Context) error { return nil }, Registry: reg}).Routes(e)
	(&handlers.Storefront{Tenants: tenants, Products: models.NewProductStore(db), Carts: models.NewCartStore(db),
		Orders: orders, Payments: service, Keys: keys, Journal: journal, Idempotency: idem, Cards: cards}).Routes(e)
	api := e.Group("/api/v1", handlers.APIKeyAuth(tenants))
	(&handlers.CatalogAPI{Products: models.NewProductStore(db)}).Routes(api)
	(&handlers.OrdersAPI{Orders: orders, Idempotency: idem}).Routes(api)
	(&handlers.PaymentsAPI{Ops: service, Idempotency: idem, Cards: cards}).Routes(api)
	reconciler := &payments.Reconciler{DB: db, Gateway: gateway, Keys: keys, Grace: time.Minute}
	(&handlers.OpsPages{Mailbox: effects, Reconciler: reconciler, Tenants: tenants}).Routes(e)
	(&handlers.LabPages{Runner: &fakeLabRunner{}, Runs: models.NewLabRunStore(db)}).Routes(e)
	(&handlers.DemoTools{Reset: func(context.Context) error { return nil }}).Routes(e)

	srv := httptest.NewUnstartedServer(e)
	if !unstarted {
		srv.Start()
	}
	tb.Cleanup(srv.Close)
	return &secureShop{srv: srv, db: db, signer: signer, ops: ops}
}

// mustDo sends req with client and returns the status and body.
func mustDo(tb testing.TB, client *http.Client, req *http.Request) (*http.Response, string) {
	tb.Helper()
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func noRedirects() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
