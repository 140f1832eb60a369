package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"checkoutlab/cmd/shop/internal/chaos"
	"checkoutlab/cmd/shop/internal/labrun"
	"checkoutlab/cmd/shop/internal/stack"
	"checkoutlab/handlers"
	"checkoutlab/handlers/idempotency"
	"checkoutlab/models"
	"checkoutlab/payments"
	"checkoutlab/static"
)

// mountRoutes wires the shop — stores, the payment operations, the job queue — and mounts its
// whole URL space, in one place, explicitly. It returns the background work for the stack to
// start (stack.Wire): `serve`, the failure lab and the end-to-end tests all start this shop.
func mountRoutes(p stack.Parts) (*stack.Background, error) {
	e, cfg, db, registry, logger := p.Echo, p.Config, p.DB, p.Registry, p.Logger
	tenants := models.NewTenantStore(db)
	products := models.NewProductStore(db)
	orders := models.NewOrderStore(db)
	keys := models.NewIdempotencyStore(db)
	effects := models.NewSideEffectStore(db)
	journal := models.NewJournalStore(db, logger)
	journal.WriteThrough = cfg.CrashAt != "" // a drill's shop dies at its crash point
	protect := cfg.Protections               // all on, except in a failure-lab stack
	if protect.Off != "" {
		logger.Warn("FAILURE LAB STACK: a protection is OFF; this shop double-charges on purpose. Never run it for real customers.",
			"protection_off", string(protect.Off))
	}
	// One span per request, around all the rest (docs/traces.md); no-op unless tracing is on.
	e.Pre(handlers.Tracing())
	idem := &idempotency.Middleware{Store: handlers.TraceReservations(protect.Reserver(keys)), Lease: cfg.IdempotencyLease, Scope: handlers.KeyScope,
		RenderError: handlers.ErrorResponse, Metrics: idempotency.NewMetrics(registry), Journal: journal}
	// A request held by Prefer: wait hears of owners in other processes (the lab's replicas)
	// through PostgreSQL's LISTEN/NOTIFY, with a look at its key every second in case an
	// announcement was missed; SQLite has no notifications, so it looks every 25 ms.
	idem.Keys, idem.PollEvery = keys, time.Second
	listener := models.NewKeyListener(db, idem.Wake, idem.WakeAll, logger) // nil on SQLite
	if listener == nil {
		idem.PollEvery = 25 * time.Millisecond
	}
	gateway := payments.NewGatewayClient(cfg.GatewayURL, cfg.GatewayTimeout)
	gateway.ControlToken = cfg.GatewayControlToken // reconciliation reads the gateway's ledger
	cards := handlers.NewCardFingerprint(p.Secret)

	service := &payments.Service{
		DB: db, Gateway: gateway, Render: handlers.RenderOperation,
		Crash: payments.Crasher(cfg.CrashAt), Journal: journal, Logger: logger, Protections: protect,
	}
	completer := &payments.Completer{Keys: keys, Service: service, Endpoints: handlers.PaymentEndpoints,
		Lease: cfg.IdempotencyLease, Batch: cfg.CompleterBatch, Logger: logger}
	reaper := &payments.Reaper{Store: keys, Retention: cfg.IdempotencyRetention,
		Journal: journal, JournalRetention: cfg.JournalRetention, Logger: logger}

	workers := river.NewWorkers()
	river.AddWorker(workers, &payments.ReceiptWorker{Orders: orders, Effects: effects, Journal: journal, Protections: protect,
		// The receipt's link opens the order's page in any browser: the customer's mail client
		// is not the session that placed the order.
		OrderLink: func(id string) string { return cfg.ShopPublicURL + p.Signer.OrderLink(id) }})
	river.AddWorker(workers, &payments.ShipmentWorker{Orders: orders, Effects: effects, Journal: journal, Protections: protect})
	river.AddWorker(workers, &payments.ReaperWorker{Reaper: reaper})
	river.AddWorker(workers, &payments.ExpiryWorker{Expiry: &payments.Expiry{Orders: orders, Hold: cfg.OrderHold,
		Journal: journal, Logger: logger}})
	periodic := []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(reapInterval(min(cfg.IdempotencyRetention, cfg.JournalRetention))),
			func() (river.JobArgs, *river.InsertOpts) { return payments.ReapArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}),
		payments.ExpiryPeriodicJob(cfg.OrderHold), // unpaid orders give their stock back
	}
	jobs, err := payments.NewJobs(payments.JobsConfig{DB: db, Workers: workers, Periodic: periodic,
		RescueAfter: cfg.JobRescueAfter,
		MaxWorkers:  cfg.JobWorkers,
		Logger:      slog.New(atLeast{slog.LevelWarn, logger.Handler()}).With("component", "jobs")})
	if err != nil {
		return nil, err
	}
	jobs.Protections = protect
	service.Outbox = jobs
	verifier, err := payments.NewWebhookVerifier(cfg.WebhookSecret)
	if err != nil {
		return nil, err
	}

	// The operator tools show every tenant's customers, start whole shops or hand out the
	// gateway's token: they need an operator session. e.Use runs the guard after routing on
	// every request, so it matches the route that runs, whichever handler group mounted it.
	e.Use(p.Operators.Guard(handlers.OperatorRoutes...))
	p.Operators.Routes(e)
	e.StaticFS("/static", static.FS)
	(&handlers.Ops{Ping: func(ctx context.Context) error { return models.Ping(ctx, db) }, Registry: registry}).Routes(e)
	processor := &payments.WebhookProcessor{DB: db, Outbox: jobs, Journal: journal, Logger: logger, Protections: protect}
	(&handlers.Webhooks{Verifier: verifier, Processor: processor}).Routes(e)

	(&handlers.Storefront{Tenants: tenants, Products: products, Carts: models.NewCartStore(db), Orders: orders,
		Payments: service, Idempotency: idem, Cards: cards, Keys: keys, Journal: journal}).Routes(e)

	api := e.Group("/api/v1", handlers.APIKeyAuth(tenants))
	(&handlers.CatalogAPI{Products: products}).Routes(api)
	(&handlers.OrdersAPI{Orders: orders, Idempotency: idem}).Routes(api)
	(&handlers.OrdersOpsAPI{Orders: orders, Effects: effects, Journal: journal}).Routes(api)
	(&handlers.PaymentsAPI{Ops: service, Idempotency: idem, Cards: cards}).Routes(api)
	decisions := models.NewDecisionStore(db)
	reconciler := &payments.Reconciler{DB: db, Gateway: gateway, Keys: keys, Dismissed: decisions,
		Grace: 2*cfg.IdempotencyLease + cfg.CompleterInterval + 2*cfg.GatewayTimeout}
	desk := &payments.Triage{DB: db, Reconciler: reconciler, Gateway: gateway, Webhooks: processor, Service: service,
		Endpoints: handlers.PaymentEndpoints, Keys: keys, Lease: cfg.IdempotencyLease, Journal: journal, Logger: logger}
	(&handlers.ReconciliationAPI{Reconciler: reconciler, Desk: desk, Idempotency: idem}).Routes(api)
	(&handlers.OpsPages{Mailbox: effects, Reconciler: reconciler, Tenants: tenants,
		Desk: desk, Decisions: decisions, Idempotency: idem, OrderLink: p.Signer.OrderLink}).Routes(e)
	// The lab links to the gateway's page through /gateway, which logs the browser in there.
	(&handlers.LabPages{Runner: cfg.Lab, Runs: models.NewLabRunStore(db), GatewayURL: "/gateway", Logger: logger}).Routes(e)
	if lr, ok := cfg.Lab.(*labrun.Runner); ok { // the lab's chaos mode runs the lab's stacks
		(&handlers.ChaosPages{Runner: &chaos.Runner{Lab: lr}, Store: models.NewChaosRunStore(db)}).Routes(e)
	}
	(&handlers.DemoTools{GatewayURL: cfg.GatewayURL, GatewayToken: cfg.GatewayControlToken, Reset: func(ctx context.Context) error {
		_, err := models.ResetDemo(ctx, db, models.DemoTenants(cfg.APIKeys))
		return err
	}}).Routes(e)
	return &stack.Background{Jobs: jobs, Completer: completer, Journal: journal, KeyListener: listener}, nil
}

// reapInterval runs the reaper often enough that what it deletes outlives its retention by at
// most a few percent, and at most every minute and at least every hour. The reaper has two
// retentions (keys and journal); give it the shorter.
func reapInterval(retention time.Duration) time.Duration {
	return min(max(retention/50, time.Minute), time.Hour)
}

// atLeast passes on only records of at least level: River reports its routine (polling mode,
// leadership) at info, which would drown the shop's own log.
type atLeast struct {
	level slog.Level
	slog.Handler
}

func (h atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}

func (h atLeast) WithAttrs(attrs []slog.Attr) slog.Handler {
	return atLeast{h.level, h.Handler.WithAttrs(attrs)}
}

func (h atLeast) WithGroup(name string) slog.Handler {
	return atLeast{h.level, h.Handler.WithGroup(name)}
}
