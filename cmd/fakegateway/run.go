package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"

	"checkoutlab/fakegateway"
)

// config is everything the command reads from its environment and flags.
type config struct {
	Addr          string
	DataDir       string
	DatabaseURL   string
	WebhookURL    string
	WebhookSecret string
}

// loadConfig reads flags and environment, applies the defaults of contract section 1 and
// fails fast on a value that cannot work.
func loadConfig(args []string, getenv func(string) string, stdout io.Writer) (config, error) {
	env := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	cfg := config{
		DatabaseURL:   env("DATABASE_URL", ""),
		WebhookSecret: env("WEBHOOK_SECRET", fakegateway.DemoWebhookSecret),
	}
	fs := flag.NewFlagSet("fakegateway", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.StringVar(&cfg.Addr, "addr", env("GATEWAY_ADDR", "127.0.0.1:8081"), "listen address (GATEWAY_ADDR)")
	fs.StringVar(&cfg.DataDir, "data-dir", env("DATA_DIR", "./data"), "directory of gateway.db (DATA_DIR)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	shop := env("SHOP_PUBLIC_URL", "http://"+env("SHOP_ADDR", "127.0.0.1:8080"))
	u, err := url.Parse(shop)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return cfg, fmt.Errorf("SHOP_PUBLIC_URL must be an absolute http(s) URL, got %q", shop)
	}
	cfg.WebhookURL = strings.TrimRight(shop, "/") + "/webhooks/gateway"
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return cfg, fmt.Errorf("GATEWAY_ADDR must be host:port, got %q", cfg.Addr)
	}
	return cfg, nil
}

// run starts the gateway and serves until ctx ends, then shuts down gracefully (see
// fakegateway.Gateway.Serve).
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(args, getenv, stdout)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stdout, nil))
	db, err := fakegateway.OpenDB(ctx, cfg.DatabaseURL, cfg.DataDir)
	if err != nil {
		return err
	}
	defer func() { _ = fakegateway.CloseDB(db) }()
	gw, err := fakegateway.New(fakegateway.Config{
		DB: db, WebhookURL: cfg.WebhookURL, WebhookSecret: cfg.WebhookSecret, Logger: log,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	fmt.Fprintf(stdout, "fakegateway listening on http://%s\n", ln.Addr())
	log.Info("fakegateway started", "addr", ln.Addr().String(), "database", databaseKind(cfg.DatabaseURL),
		"demo_secret", cfg.WebhookSecret == fakegateway.DemoWebhookSecret)
	return gw.Serve(ctx, ln)
}

func databaseKind(url string) string {
	if url == "" {
		return "sqlite"
	}
	return "postgres"
}
