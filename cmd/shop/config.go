package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"checkoutlab/payments"
)

// Crash points for failure drills (SHOP_CRASH_AT); see docs/failure-modes.md.
var crashPoints = []string{"after_key_reserved", "after_order_created", "after_gateway_charge", "before_response"}

// demoWebhookSecret is the documented demo secret shared by the shop and the fake gateway.
// It signs webhooks on a developer's machine; set WEBHOOK_SECRET for anything else.
const demoWebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// Config is everything the shop reads from its environment, in one typed struct. Each
// variable may also be given as a flag (the flag wins). A bad value fails at start with a
// message naming the variable.
type Config struct {
	ShopAddr             string
	GatewayAddr          string
	GatewayURL           string // "" starts the fake gateway in-process
	ShopPublicURL        string
	DatabaseURL          string // "" selects the embedded SQLite database
	DataDir              string
	WebhookSecret        string
	IdempotencyLease     time.Duration
	IdempotencyRetention time.Duration
	JournalRetention     time.Duration
	GatewayTimeout       time.Duration
	CompleterInterval    time.Duration
	JobRescueAfter       time.Duration
	CrashAt              string
	APIKeys              map[string]string // tenant id → API key, for seeding the demo
	LogLevel             string

	publicURLDefaulted bool // SHOP_PUBLIC_URL was not given: follow the real listen address

	// protections is all on. No variable or flag of `serve` sets it: only the failure lab
	// builds a stack with one protection off — in its own process (lab.go), or as the child
	// process of a crash scenario, `shop lab shop --off SWITCH` (lab_process.go).
	protections payments.Protections
}

// loadConfig reads the environment through getenv, then flags from args.
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	env := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	var cfg Config
	var lease, retention, journalRetention, gwTimeout, completer, jobRescue, apiKeys string
	fs := flag.NewFlagSet("shop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.ShopAddr, "addr", env("SHOP_ADDR", "127.0.0.1:8080"), "listen address of the shop (SHOP_ADDR)")
	fs.StringVar(&cfg.GatewayAddr, "gateway-addr", env("GATEWAY_ADDR", "127.0.0.1:8081"), "listen address of the in-process fake gateway (GATEWAY_ADDR)")
	fs.StringVar(&cfg.GatewayURL, "gateway-url", env("GATEWAY_URL", ""), "base URL of an external fake gateway; empty starts one in-process (GATEWAY_URL)")
	fs.StringVar(&cfg.ShopPublicURL, "public-url", env("SHOP_PUBLIC_URL", ""), "where the gateway delivers webhooks; default http://SHOP_ADDR (SHOP_PUBLIC_URL)")
	fs.StringVar(&cfg.DatabaseURL, "database-url", env("DATABASE_URL", ""), "postgres://… URL; empty uses embedded SQLite (DATABASE_URL)")
	fs.StringVar(&cfg.DataDir, "data-dir", env("DATA_DIR", "./data"), "directory of the embedded database files (DATA_DIR)")
	fs.StringVar(&cfg.WebhookSecret, "webhook-secret", env("WEBHOOK_SECRET", demoWebhookSecret), "Standard Webhooks signing secret (WEBHOOK_SECRET)")
	fs.StringVar(&lease, "idempotency-lease", env("IDEMPOTENCY_LEASE", "30s"), "how long a silent key owner keeps its key (IDEMPOTENCY_LEASE)")
	fs.StringVar(&retention, "idempotency-retention", env("IDEMPOTENCY_RETENTION", "24h"), "how long completed keys are kept (IDEMPOTENCY_RETENTION)")
	fs.StringVar(&journalRetention, "journal-retention", env("JOURNAL_RETENTION", "720h"), "how long journal events are kept (JOURNAL_RETENTION)")
	fs.StringVar(&gwTimeout, "gateway-timeout", env("GATEWAY_TIMEOUT", "10s"), "client timeout for calls to the gateway (GATEWAY_TIMEOUT)")
	fs.StringVar(&completer, "completer-interval", env("COMPLETER_INTERVAL", "5s"), "how often the completer looks for abandoned operations (COMPLETER_INTERVAL)")
	fs.StringVar(&jobRescue, "job-rescue-after", env("JOB_RESCUE_AFTER", "1m"), "how long a side-effect job taken by a process that died waits before it runs again (JOB_RESCUE_AFTER)")
	fs.StringVar(&cfg.CrashAt, "crash-at", env("SHOP_CRASH_AT", ""), "crash point for failure drills (SHOP_CRASH_AT)")
	fs.StringVar(&apiKeys, "api-keys", env("SHOP_API_KEYS", "acme=sk_test_acme,globex=sk_test_globex"), "demo API keys as tenant=key,… used when seeding (SHOP_API_KEYS)")
	fs.StringVar(&cfg.LogLevel, "log-level", env("LOG_LEVEL", "info"), "debug, info, warn or error (LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}

	var err error
	if cfg.IdempotencyLease, err = positiveDuration("IDEMPOTENCY_LEASE", lease); err != nil {
		return cfg, err
	}
	if cfg.IdempotencyRetention, err = positiveDuration("IDEMPOTENCY_RETENTION", retention); err != nil {
		return cfg, err
	}
	if cfg.JournalRetention, err = positiveDuration("JOURNAL_RETENTION", journalRetention); err != nil {
		return cfg, err
	}
	if cfg.GatewayTimeout, err = positiveDuration("GATEWAY_TIMEOUT", gwTimeout); err != nil {
		return cfg, err
	}
	if cfg.CompleterInterval, err = positiveDuration("COMPLETER_INTERVAL", completer); err != nil {
		return cfg, err
	}
	if cfg.JobRescueAfter, err = positiveDuration("JOB_RESCUE_AFTER", jobRescue); err != nil {
		return cfg, err
	}
	if err := checkAddr("SHOP_ADDR", cfg.ShopAddr); err != nil {
		return cfg, err
	}
	if err := checkAddr("GATEWAY_ADDR", cfg.GatewayAddr); err != nil {
		return cfg, err
	}
	if cfg.ShopPublicURL == "" {
		cfg.ShopPublicURL = "http://" + cfg.ShopAddr
		cfg.publicURLDefaulted = true
	}
	cfg.ShopPublicURL = strings.TrimRight(cfg.ShopPublicURL, "/")
	cfg.GatewayURL = strings.TrimRight(cfg.GatewayURL, "/")
	if cfg.DatabaseURL != "" && !strings.HasPrefix(cfg.DatabaseURL, "postgres://") && !strings.HasPrefix(cfg.DatabaseURL, "postgresql://") {
		return cfg, fmt.Errorf("DATABASE_URL must be a postgres:// URL (leave it unset for the embedded SQLite database)")
	}
	if !strings.HasPrefix(cfg.WebhookSecret, "whsec_") {
		return cfg, fmt.Errorf("WEBHOOK_SECRET must look like whsec_<base64>")
	}
	if cfg.CrashAt != "" && !contains(crashPoints, cfg.CrashAt) {
		return cfg, fmt.Errorf("SHOP_CRASH_AT=%q is not a crash point; use one of %s", cfg.CrashAt, strings.Join(crashPoints, ", "))
	}
	if cfg.APIKeys, err = parseAPIKeys(apiKeys); err != nil {
		return cfg, err
	}
	switch cfg.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return cfg, fmt.Errorf("LOG_LEVEL=%q: use debug, info, warn or error", cfg.LogLevel)
	}
	return cfg, nil
}

func positiveDuration(name, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 30s or 24h", name, v)
	}
	return d, nil
}

func checkAddr(name, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%s=%q: want host:port, e.g. 127.0.0.1:8080", name, addr)
	}
	return nil
}

func parseAPIKeys(s string) (map[string]string, error) {
	keys := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		tenant, key, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || tenant == "" || len(key) < 8 {
			return nil, fmt.Errorf("SHOP_API_KEYS: %q is not tenant=key (keys have at least 8 characters)", pair)
		}
		keys[tenant] = key
	}
	for _, t := range []string{"acme", "globex"} {
		if keys[t] == "" {
			return nil, fmt.Errorf("SHOP_API_KEYS must give a key for the demo tenant %s", t)
		}
	}
	return keys, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
