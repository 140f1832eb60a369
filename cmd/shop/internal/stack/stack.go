// Package stack starts and stops one whole Checkout Lab stack: the shop's database (opened,
// migrated, seeded), the fake gateway in the same process unless an external one is
// configured, the background work (job queue, completer, journal) and the HTTP server. Start
// returns a handle that knows the shop's and the gateway's real URLs, so a stack started on
// port 0 needs no log line to be found.
//
// `shop serve`, the failure lab and cmd/shop's end-to-end tests all start stacks through
// Start; what the shop is made of — stores, operations, routes — is the Wire function they
// pass, cmd/shop's mountRoutes.
package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"checkoutlab/handlers"
	"checkoutlab/models"
	"checkoutlab/payments"
)

// Config is everything a stack is started from. cmd/shop's loader fills the first group from
// the environment and flags; the second group is set by code only.
type Config struct {
	ShopAddr             string
	GatewayAddr          string
	GatewayURL           string // "" starts the fake gateway in-process
	ShopPublicURL        string
	DatabaseURL          string // "" selects the embedded SQLite database
	DataDir              string
	WebhookSecret        string
	GatewayControlToken  string // the gateway's control API (and page) token; the in-process gateway requires it
	ShopSecret           string // signs sessions, order links, operator logins; keys card fingerprints; "" keeps one in DATA_DIR
	OpsPassword          string // "" makes one at each start, reached through the logged login link
	ShopEnv              string // "development" or "production" (refuses the demo secrets)
	CheckHosts           bool   // answer only requests for the shop's own host names
	IdempotencyLease     time.Duration
	IdempotencyRetention time.Duration
	JournalRetention     time.Duration
	OrderHold            time.Duration
	GatewayTimeout       time.Duration
	CompleterInterval    time.Duration
	CompleterBatch       int
	JobRescueAfter       time.Duration
	DBPoolSize           int // connections of the PostgreSQL pool; SQLite always has one
	JobWorkers           int // jobs run at once; 0 sizes the queue to the pool (payments.JobWorkers)
	WebhookSenders       int // webhooks the in-process gateway sends at once
	CrashAt              string
	APIKeys              map[string]string // tenant id → API key, for seeding the demo
	LogLevel             string

	// DemoSecrets are the secrets' published demo values, cmd/shop's defaults: Start warns
	// while any of them is in use and, with ShopEnv "production", refuses to start.
	DemoSecrets handlers.DemoValues

	// PublicURLFollowsAddr is set when SHOP_PUBLIC_URL was not given: the public URL is then
	// the address the shop really listens on, known only once it listens (SHOP_ADDR=…:0, or
	// an inherited Listener).
	PublicURLFollowsAddr bool

	// Protections is all on. No variable or flag of `serve` sets it: only the failure lab
	// builds a stack with one protection off.
	Protections payments.Protections
	// Listener, if set, is where the shop serves instead of listening on ShopAddr: the lab
	// hands a crash scenario's shop a listener it keeps across the shop's restarts.
	Listener net.Listener
	// Lab runs the /lab pages' scenarios.
	Lab handlers.LabRunner
	// LogOutput receives the stack's log, as text at LogLevel; nil discards it.
	LogOutput io.Writer
}

// Wire builds the shop on p.DB — stores, payment operations, job queue — and mounts its
// routes on p.Echo. It returns the background work for Start to run and Close to stop.
type Wire func(p Parts) (*Background, error)

// Parts are what Start has made when it calls Wire.
type Parts struct {
	// Config is the stack's, with the real ShopPublicURL and GatewayURL.
	Config Config
	// Echo is the router, with the shop's common middleware, signing with Signer.
	Echo *echo.Echo
	// DB is migrated and seeded.
	DB *gorm.DB
	// Secret is the shop's own secret (SHOP_SECRET, or the key file in DATA_DIR), never in
	// the database and never shared with the gateway. Every process of one shop shares it:
	// Signer's key is it, so an order link opens in any of them, and the card fingerprint
	// derives its key from it, so a retry through another process fingerprints the card alike.
	Secret []byte
	Signer *handlers.Signer
	// Operators is the operator login, for the wiring to mount and to guard the operator
	// routes with.
	Operators *handlers.OpsAuth
	Registry  *prometheus.Registry
	Logger    *slog.Logger
}

// Background is the work a shop does besides answering requests.
type Background struct {
	Jobs      *payments.Jobs
	Completer *payments.Completer
	Journal   *models.JournalStore
	// KeyListener wakes the requests held by Prefer: wait for owners in other processes
	// (PostgreSQL only; nil on SQLite).
	KeyListener *models.KeyListener
}

// Stack is a running shop with its gateway. Its methods are safe to call from any goroutine.
type Stack struct {
	cfg     Config
	logger  *slog.Logger
	db      *gorm.DB
	gateway *Gateway // nil with an external gateway
	secret  []byte
	signer  *handlers.Signer
	ops     *handlers.OpsAuth
	work    *Background
	srv     *http.Server
	url     string

	cancel    context.CancelFunc // ends the background work
	running   sync.WaitGroup     // the completer and the journal writer
	served    chan error         // the HTTP server's end, if it ends by itself
	closeOnce sync.Once
	closeErr  error
}

// Migrate opens cfg's database, applies the shop's migrations and the job queue's, and
// returns the database for the caller to close.
func Migrate(ctx context.Context, cfg Config) (*gorm.DB, error) {
	db, err := models.OpenPool(ctx, cfg.DatabaseURL, cfg.DataDir, "shop.db", cfg.DBPoolSize)
	if err != nil {
		return nil, err
	}
	if err := models.Migrate(ctx, db); err != nil {
		models.Close(db)
		return nil, err
	}
	if err := payments.MigrateJobQueue(ctx, db); err != nil {
		models.Close(db)
		return nil, err
	}
	return db, nil
}

// Start opens and migrates the database, seeds the demo tenants into an empty one, starts
// the in-process gateway (unless cfg.GatewayURL is set), wires the shop with wire, starts its
// background work and serves HTTP. ctx bounds the start only: the stack runs until Close.
// On error, whatever had started is stopped again.
func Start(ctx context.Context, cfg Config, wire Wire) (*Stack, error) {
	s := &Stack{cfg: cfg, logger: NewLogger(cfg.LogOutput, cfg.LogLevel), served: make(chan error, 1)}
	if err := s.start(ctx, wire); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Stack) start(ctx context.Context, wire Wire) error {
	cfg := &s.cfg
	var err error
	if s.db, err = Migrate(ctx, *cfg); err != nil {
		return err
	}
	if cfg.IdempotencyRetention < 24*time.Hour {
		s.logger.Warn("IDEMPOTENCY_RETENTION is shorter than the 24h the API promises; use this only for drills",
			"retention", cfg.IdempotencyRetention)
	}
	// Before seeding: a production shop refused for its demo keys has stored none of them.
	if err := s.checkDemoSecrets(ctx); err != nil {
		return err
	}
	seeded, err := models.SeedIfEmpty(ctx, s.db, models.DemoTenants(cfg.APIKeys))
	if err != nil {
		return err
	}
	if seeded {
		s.logger.Info("seeded demo tenants acme and globex")
	}
	if s.secret, err = loadSecret(*cfg); err != nil {
		return err
	}
	if s.signer, err = handlers.NewSigner(s.secret); err != nil {
		return err
	}

	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.ShopAddr); err != nil {
			return fmt.Errorf("listen on SHOP_ADDR %s: %w", cfg.ShopAddr, err)
		}
	}
	s.url = "http://" + ln.Addr().String()
	if cfg.PublicURLFollowsAddr {
		// With SHOP_ADDR=…:0 the real port is known only now; webhooks must reach it.
		cfg.ShopPublicURL = s.url
	}
	if cfg.GatewayURL == "" {
		if s.gateway, err = StartGateway(ctx, *cfg, s.logger); err != nil {
			ln.Close()
			return err
		}
		cfg.GatewayURL = s.gateway.URL()
	}

	s.ops = handlers.NewOpsAuth(cfg.OpsPassword, s.signer)
	s.ops.Secure = strings.HasPrefix(cfg.ShopPublicURL, "https://")
	if s.ops.Generated {
		s.logger.Warn("operator login: OPS_PASSWORD is unset, so this start made a password; "+
			"open this link to log in to /lab, /mailbox and /reconciliation (it changes at each start)",
			"url", s.ops.LoginURL(cfg.ShopPublicURL))
	}
	opts := []handlers.RouterOption{handlers.WithSigner(s.signer)}
	if cfg.CheckHosts {
		opts = append(opts, handlers.WithAllowedHosts(handlers.AllowedHosts(cfg.ShopPublicURL, ln.Addr().String())))
	}
	registry := handlers.NewRegistry()
	e := handlers.NewRouter(s.logger, registry, opts...)
	s.work, err = wire(Parts{Config: *cfg, Echo: e, DB: s.db, Secret: s.secret, Signer: s.signer, Operators: s.ops,
		Registry: registry, Logger: s.logger})
	if err != nil {
		ln.Close()
		return err
	}
	// Background work outlives ctx, which bounds the start only; Close ends it.
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	// The job queue delivers side effects and runs the reaper.
	if err := s.work.Jobs.Start(bg); err != nil {
		ln.Close()
		return fmt.Errorf("start job queue: %w", err)
	}
	s.running.Add(2)
	go func() { defer s.running.Done(); s.work.Completer.Run(bg, cfg.CompleterInterval) }()
	go func() { defer s.running.Done(); s.work.Journal.Run(bg) }()
	if l := s.work.KeyListener; l != nil {
		s.running.Add(1)
		go func() { defer s.running.Done(); l.Run(bg) }()
	}

	s.srv = &http.Server{
		Handler:           e,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		// Long enough for a checkout that waits on a slow gateway (GATEWAY_TIMEOUT) and retries.
		WriteTimeout: 2*cfg.GatewayTimeout + 15*time.Second,
		IdleTimeout:  60 * time.Second,
		ErrorLog:     slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	go func() { s.served <- s.srv.Serve(ln) }()
	return nil
}

// checkDemoSecrets warns, loudly, while the stack runs with any of the published demo
// secrets, and refuses them when cfg.ShopEnv is "production". API keys are stored when an
// empty database is seeded and accepted from then on, whatever SHOP_API_KEYS says later: the
// keys in use are SHOP_API_KEYS (what seeding would store) and the demo keys the database
// already accepts.
func (s *Stack) checkDemoSecrets(ctx context.Context) error {
	cfg := s.cfg
	accepted, err := handlers.AcceptedAPIKeys(ctx, models.NewTenantStore(s.db), cfg.DemoSecrets.APIKeys)
	if err != nil {
		return err
	}
	keys := maps.Clone(cfg.APIKeys)
	maps.Copy(keys, accepted)
	inUse := handlers.DemoSecretsInUse(
		handlers.DemoValues{WebhookSecret: cfg.WebhookSecret, APIKeys: keys, GatewayControlToken: cfg.GatewayControlToken},
		cfg.DemoSecrets)
	if err := handlers.RefuseDemoSecrets(cfg.ShopEnv, inUse); err != nil {
		return err
	}
	if len(inUse) > 0 {
		s.logger.Warn("DEMO SECRETS IN USE: these settings hold the values published with Checkout Lab, so anyone "+
			"who has read them can sign webhooks, call the API as a tenant or drive the gateway. Fine for a demo on "+
			"your own machine; set each to a secret of your own for anything else (SHOP_ENV=production refuses them)",
			"demo_secrets", strings.Join(inUse, "; "))
	}
	return nil
}

// loadSecret returns the shop's secret: SHOP_SECRET, or the one kept in the file
// DATA_DIR/shop.secret, made at the first start. Every process of one shop must share it —
// the lab's crash shops and replicas on one database are given SHOP_SECRET or one DATA_DIR.
func loadSecret(cfg Config) ([]byte, error) {
	if cfg.ShopSecret != "" {
		return []byte(cfg.ShopSecret), nil
	}
	return handlers.LoadOrCreateSecret(filepath.Join(cfg.DataDir, "shop.secret"))
}

// URL is the shop's base URL, e.g. "http://127.0.0.1:43121", with the port it really got.
func (s *Stack) URL() string { return s.url }

// OperatorLoginURL is the one-click operator login link on URL: a client that GETs it with a
// cookie jar holds an operator session afterwards.
func (s *Stack) OperatorLoginURL() string { return s.ops.LoginURL(s.url) }

// OrderLink is the absolute signed link of an order's page, the one its receipt carries: it
// opens the page for anyone who holds it.
func (s *Stack) OrderLink(orderID string) string { return s.url + s.signer.OrderLink(orderID) }

// GatewayControlToken is the token the gateway's control API (/_control/*) wants as
// "Authorization: Bearer <token>", and its page as /?token=<token>.
func (s *Stack) GatewayControlToken() string { return s.cfg.GatewayControlToken }

// GatewayURL is the base URL of the gateway the shop calls: the in-process one, or the
// configured GATEWAY_URL.
func (s *Stack) GatewayURL() string { return s.cfg.GatewayURL }

// DB is the shop's database. It stays open until Close.
func (s *Stack) DB() *gorm.DB { return s.db }

// Dialect is the shop database's dialect, models.Postgres or models.SQLite.
func (s *Stack) Dialect() string { return models.Dialect(s.db) }

// Wait blocks until ctx ends, returning nil, or until the shop's HTTP server stops by itself,
// returning why. It does not stop the stack: call Close.
func (s *Stack) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-s.served:
		s.served <- err // for Close
		return fmt.Errorf("serve: %w", err)
	}
}

// Close stops the stack gracefully: the HTTP server finishes the requests in flight (up to
// 10 s), the job queue stops, the completer, the journal writer and the gateway end, and the
// database is closed. It returns the HTTP server's shutdown error, if any; calling it again
// returns the same.
func (s *Stack) Close() error {
	s.closeOnce.Do(func() {
		if s.srv != nil {
			s.logger.Info("shutting down")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.closeErr = fmt.Errorf("shutdown: %w", err)
			}
			cancel()
		}
		if s.work != nil && s.cancel != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := s.work.Jobs.Stop(ctx); err != nil {
				s.logger.Warn("stop job queue", "err", err)
			}
			cancel()
		}
		if s.cancel != nil {
			s.cancel()
		}
		s.running.Wait()
		if s.gateway != nil {
			s.gateway.Close()
		}
		if s.db != nil {
			models.Close(s.db)
		}
	})
	return s.closeErr
}

// NewLogger logs text lines at level ("debug", "info", "warn" or "error") to w; a nil w
// discards them.
func NewLogger(w io.Writer, level string) *slog.Logger {
	if w == nil {
		return slog.New(slog.DiscardHandler)
	}
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}
