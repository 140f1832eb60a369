// Command shop runs Checkout Lab: the storefront, the JSON API and, unless GATEWAY_URL points
// at an external one, the fake payment gateway in the same process.
//
//	go run ./cmd/shop            serve (migrates and seeds demo data first)
//	go run ./cmd/shop migrate    apply database migrations and exit
//	go run ./cmd/shop lab list   the failure lab's scenarios
//	go run ./cmd/shop lab run [--json] [--database-url URL] [scenario …]
//	                             run scenarios with protection on and off (see lab.go)
//	go run ./cmd/shop lab run --shop URL [--gateway URL] [scenario …]
//	                             run them, protected, against a shop that is already running
//	shop lab shop [--off SWITCH] a crash scenario's shop; the lab starts it (lab_process.go)
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"gorm.io/gorm"

	"checkoutlab/fakegateway"
	"checkoutlab/handlers"
	"checkoutlab/models"
	"checkoutlab/payments"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "shop:", err)
		os.Exit(1)
	}
}

// run is the whole program: it parses configuration, opens the database and serves until ctx
// is cancelled. End-to-end tests call it directly with SHOP_ADDR=127.0.0.1:0 and read the
// listening address from the "listening" line it prints to stdout.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	command := "serve"
	if len(args) > 0 && (args[0] == "serve" || args[0] == "migrate") {
		command, args = args[0], args[1:]
	}
	if len(args) > 0 && args[0] == "lab" {
		return runLab(ctx, args[1:], stdout)
	}
	cfg, err := loadConfig(args, getenv, stdout)
	if err != nil {
		return err
	}
	return start(ctx, command, cfg, stdout)
}

// start opens and migrates the database, then runs command ("serve" or "migrate") with cfg.
// The failure lab calls it too, with a cfg whose protections it set.
func start(ctx context.Context, command string, cfg Config, stdout io.Writer) error {
	logger := newLogger(stdout, cfg.LogLevel)

	db, err := models.Open(ctx, cfg.DatabaseURL, cfg.DataDir, "shop.db")
	if err != nil {
		return err
	}
	defer models.Close(db)
	if err := models.Migrate(ctx, db); err != nil {
		return err
	}
	if err := payments.MigrateJobQueue(ctx, db); err != nil {
		return err
	}
	if command == "migrate" {
		fmt.Fprintf(stdout, "migrations applied (%s)\n", models.Dialect(db))
		return nil
	}
	if cfg.IdempotencyRetention < 24*time.Hour {
		logger.Warn("IDEMPOTENCY_RETENTION is shorter than the 24h the API promises; use this only for drills",
			"retention", cfg.IdempotencyRetention)
	}
	seeded, err := models.SeedIfEmpty(ctx, db, models.DemoTenants(cfg.APIKeys))
	if err != nil {
		return err
	}
	if seeded {
		logger.Info("seeded demo tenants acme and globex")
	}
	return serve(ctx, cfg, db, logger, stdout)
}

// serve starts the in-process gateway (unless GATEWAY_URL is set), builds the HTTP server and
// runs both until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, cfg Config, db *gorm.DB, logger *slog.Logger, stdout io.Writer) error {
	ln, err := net.Listen("tcp", cfg.ShopAddr)
	if err != nil {
		return fmt.Errorf("listen on SHOP_ADDR %s: %w", cfg.ShopAddr, err)
	}
	defer ln.Close()
	if cfg.publicURLDefaulted {
		// With SHOP_ADDR=…:0 the real port is known only now; webhooks must reach it.
		cfg.ShopPublicURL = "http://" + ln.Addr().String()
	}

	// Deferred calls run last-in first-out: cancel stops the background work, then Wait
	// waits for it.
	var background sync.WaitGroup
	defer background.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.GatewayURL == "" {
		url, err := startGateway(ctx, cfg, logger, &background)
		if err != nil {
			return err
		}
		cfg.GatewayURL = url
		fmt.Fprintf(stdout, "checkoutlab: fake gateway listening on %s\n", url)
	}

	registry := handlers.NewRegistry()
	e := handlers.NewRouter(logger, registry)
	work, err := mountRoutes(e, cfg, db, registry, logger)
	if err != nil {
		return err
	}
	// The job queue delivers side effects and runs the reaper.
	if err := work.jobs.Start(ctx); err != nil {
		return fmt.Errorf("start job queue: %w", err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := work.jobs.Stop(stopCtx); err != nil {
			logger.Warn("stop job queue", "err", err)
		}
	}()
	background.Add(2)
	go func() { defer background.Done(); work.completer.Run(ctx, cfg.CompleterInterval) }()
	go func() { defer background.Done(); work.journal.Run(ctx) }()

	srv := &http.Server{
		Handler:           e,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		// Long enough for a checkout that waits on a slow gateway (GATEWAY_TIMEOUT) and retries.
		WriteTimeout: 2*cfg.GatewayTimeout + 15*time.Second,
		IdleTimeout:  60 * time.Second,
		ErrorLog:     slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	fmt.Fprintf(stdout, "checkoutlab: shop listening on http://%s (database: %s)\n", ln.Addr(), models.Dialect(db))

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelShutdown()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// startGateway runs the fake payment gateway in this process, on its own listener and its
// own database (DATA_DIR/gateway.db, or its gw_ tables in DATABASE_URL), exactly as
// `go run ./cmd/fakegateway` would. It returns the gateway's base URL.
func startGateway(ctx context.Context, cfg Config, logger *slog.Logger, wg *sync.WaitGroup) (string, error) {
	gwDB, err := fakegateway.OpenDB(ctx, cfg.DatabaseURL, cfg.DataDir)
	if err != nil {
		return "", err
	}
	gw, err := fakegateway.New(fakegateway.Config{
		DB:            gwDB,
		WebhookURL:    cfg.ShopPublicURL + "/webhooks/gateway",
		WebhookSecret: cfg.WebhookSecret,
		Logger:        logger,
	})
	if err != nil {
		models.Close(gwDB)
		return "", err
	}
	ln, err := net.Listen("tcp", cfg.GatewayAddr)
	if err != nil {
		models.Close(gwDB)
		return "", fmt.Errorf("listen on GATEWAY_ADDR %s: %w", cfg.GatewayAddr, err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer models.Close(gwDB)
		if err := gw.Serve(ctx, ln); err != nil {
			logger.Error("fake gateway stopped", "err", err)
		}
	}()
	return "http://" + ln.Addr().String(), nil
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}
