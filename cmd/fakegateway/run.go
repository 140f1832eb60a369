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
	"time"

	"checkoutlab/fakegateway"
	"checkoutlab/telemetry"
)

// config is everything the command reads from its environment and flags.
type config struct {
	Addr          string
	DataDir       string
	DatabaseURL   string
	WebhookURL    string
	WebhookSecret string
	ControlToken  string
}

// loadConfig reads flags and environment, applies the defaults documented in main.go and
// fails fast on a value that cannot work. The control token has no flag: a flag's value is
// visible to every user of the machine in the process list.
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
		ControlToken:  env("GATEWAY_CONTROL_TOKEN", fakegateway.DemoControlToken),
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
	// Traces go to OTEL_EXPORTER_OTLP_ENDPOINT when it is set; off otherwise (docs/traces.md).
	stopTracing, err := telemetry.Setup(ctx, "fakegateway")
	if err != nil {
		return err
	}
	defer flushTraces(stopTracing, log)
	db, err := fakegateway.OpenDB(ctx, cfg.DatabaseURL, cfg.DataDir)
	if err != nil {
		return err
	}
	defer func() { _ = fakegateway.CloseDB(db) }()
	gw, err := fakegateway.New(fakegateway.Config{
		DB: db, WebhookURL: cfg.WebhookURL, WebhookSecret: cfg.WebhookSecret, Logger: log,
		ControlToken: cfg.ControlToken,
	})
	if err != nil {
		return fmt.Errorf("start gateway: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "fakegateway listening on %s\n", base)
	log.Info("fakegateway started", "addr", ln.Addr().String(), "database", databaseKind(cfg.DatabaseURL),
		"demo_secret", cfg.WebhookSecret == fakegateway.DemoWebhookSecret,
		"demo_control_token", cfg.ControlToken == fakegateway.DemoControlToken)
	warnDemoSecrets(log, cfg, base)
	return gw.Serve(ctx, ln)
}

// warnDemoSecrets says loudly when a public demo value guards this gateway, and how to open
// its page. The login link carries the token only while it is the public demo value; a token
// of the operator's own never reaches the log.
func warnDemoSecrets(log *slog.Logger, cfg config, base string) {
	if cfg.ControlToken == fakegateway.DemoControlToken {
		log.Warn("DEMO CONTROL TOKEN IN USE: GATEWAY_CONTROL_TOKEN is the public demo value, so anyone who can reach "+
			"this gateway can arm faults and refund charges. Set GATEWAY_CONTROL_TOKEN to a secret of your own "+
			"anywhere but your own machine.", "page", base+"/?token="+cfg.ControlToken)
	} else {
		log.Info("gateway page: open it with /?token=<GATEWAY_CONTROL_TOKEN>", "page", base+"/")
	}
	if cfg.WebhookSecret == fakegateway.DemoWebhookSecret {
		log.Warn("DEMO WEBHOOK SECRET IN USE: WEBHOOK_SECRET is the public demo value, so anyone can sign webhooks " +
			"the shop will believe. Set WEBHOOK_SECRET (the same in the shop) anywhere but your own machine.")
	}
}

// flushTraces sends the spans still batched, giving the collector a few seconds at most.
func flushTraces(stop func(context.Context) error, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := stop(ctx); err != nil {
		log.Warn("flush traces", "err", err)
	}
}

func databaseKind(url string) string {
	if url == "" {
		return "sqlite"
	}
	return "postgres"
}
