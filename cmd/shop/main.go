// Command shop runs Checkout Lab: the storefront, the JSON API and, unless GATEWAY_URL points
// at an external one, the fake payment gateway in the same process.
//
//	go run ./cmd/shop            serve (migrates and seeds demo data first)
//	go run ./cmd/shop migrate    apply database migrations and exit
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
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"checkoutlab/handlers"
	"checkoutlab/models"
	"checkoutlab/static"
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
	cfg, err := loadConfig(args, getenv, stdout)
	if err != nil {
		return err
	}
	logger := newLogger(stdout, cfg.LogLevel)

	db, err := models.Open(ctx, cfg.DatabaseURL, cfg.DataDir, "shop.db")
	if err != nil {
		return err
	}
	defer models.Close(db)
	if err := models.Migrate(ctx, db); err != nil {
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

// serve builds the HTTP server and runs it until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, cfg Config, db *gorm.DB, logger *slog.Logger, stdout io.Writer) error {
	registry := handlers.NewRegistry()
	e := handlers.NewRouter(logger, registry)
	mountRoutes(e, db, registry)

	ln, err := net.Listen("tcp", cfg.ShopAddr)
	if err != nil {
		return fmt.Errorf("listen on SHOP_ADDR %s: %w", cfg.ShopAddr, err)
	}
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
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// mountRoutes is the shop's whole URL space, in one place.
func mountRoutes(e *echo.Echo, db *gorm.DB, registry *prometheus.Registry) {
	tenants := models.NewTenantStore(db)
	products := models.NewProductStore(db)

	e.StaticFS("/static", static.FS)
	(&handlers.Ops{Ping: func(ctx context.Context) error { return models.Ping(ctx, db) }, Registry: registry}).Routes(e)

	orders := models.NewOrderStore(db)
	(&handlers.Storefront{Tenants: tenants, Products: products, Carts: models.NewCartStore(db), Orders: orders,
		Placer: handlers.PendingOrderPlacer{Orders: orders}}).Routes(e)

	api := e.Group("/api/v1", handlers.APIKeyAuth(tenants))
	(&handlers.CatalogAPI{Products: products}).Routes(api)
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}
