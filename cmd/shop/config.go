package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"checkoutlab/cmd/shop/internal/stack"
	"checkoutlab/fakegateway"
	"checkoutlab/handlers"
	"checkoutlab/models"
	"checkoutlab/payments"
)

// demoWebhookSecret is the documented demo secret shared by the shop and the fake gateway.
// It signs webhooks on a developer's machine; set WEBHOOK_SECRET for anything else.
const demoWebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// setting is one configuration variable: the flag that mirrors it, its default, what it
// means, and the parser that checks a value and stores it in the Config.
type setting struct {
	env, flag, def, usage string
	parse                 func(value string) error
}

// settings is the shop's configuration, one row per variable, in the order -h lists them and
// they are parsed (SHOP_PUBLIC_URL's default follows SHOP_ADDR, so it comes after it). Each
// row's parser stores into c.
func settings(c *stack.Config) []setting {
	return []setting{
		{"SHOP_ADDR", "addr", "127.0.0.1:8080", "listen address of the shop", hostPort(&c.ShopAddr)},
		{"GATEWAY_ADDR", "gateway-addr", "127.0.0.1:8081", "listen address of the in-process fake gateway", hostPort(&c.GatewayAddr)},
		{"GATEWAY_URL", "gateway-url", "", "base URL of an external fake gateway; empty starts one in-process", baseURL(&c.GatewayURL)},
		{"SHOP_PUBLIC_URL", "public-url", "", "where the gateway delivers webhooks; default http://SHOP_ADDR", publicURL(c)},
		{"DATABASE_URL", "database-url", "", "postgres://… URL; empty uses embedded SQLite", postgresURL(&c.DatabaseURL)},
		{"DATA_DIR", "data-dir", "./data", "directory of the embedded database files", text(&c.DataDir)},
		{"WEBHOOK_SECRET", "webhook-secret", demoWebhookSecret, "Standard Webhooks signing secret", webhookSecret(&c.WebhookSecret)},
		{"GATEWAY_CONTROL_TOKEN", "gateway-control-token", fakegateway.DemoControlToken, "token of the gateway's control API and page, shared by shop and gateway", controlToken(&c.GatewayControlToken)},
		{"SHOP_SECRET", "shop-secret", "", "the shop's own secret, which signs sessions, order links and operator logins and keys the card fingerprint (at least 32 characters); empty keeps one in DATA_DIR/shop.secret", shopSecret(&c.ShopSecret)},
		{"OPS_PASSWORD", "ops-password", "", "operator password of /lab, /mailbox, /reconciliation; empty makes one at each start and logs its login link", text(&c.OpsPassword)},
		{"SHOP_ENV", "env", "development", "development, or production: refuse to start with the published demo secrets", oneOf(&c.ShopEnv, "development", "production")},
		{"CHECK_HOSTS", "check-hosts", "false", "answer only requests for the host of SHOP_PUBLIC_URL, SHOP_ADDR or loopback (421 otherwise)", boolean(&c.CheckHosts)},
		{"IDEMPOTENCY_LEASE", "idempotency-lease", "30s", "how long a silent key owner keeps its key", duration(&c.IdempotencyLease)},
		{"IDEMPOTENCY_RETENTION", "idempotency-retention", "24h", "how long completed keys are kept", duration(&c.IdempotencyRetention)},
		{"JOURNAL_RETENTION", "journal-retention", "720h", "how long journal events are kept", duration(&c.JournalRetention)},
		{"GATEWAY_TIMEOUT", "gateway-timeout", "10s", "client timeout for calls to the gateway", duration(&c.GatewayTimeout)},
		{"COMPLETER_INTERVAL", "completer-interval", "5s", "how often the completer looks for abandoned operations", duration(&c.CompleterInterval)},
		{"COMPLETER_BATCH", "completer-batch", strconv.Itoa(payments.DefaultCompleterBatch), "how many abandoned operations a completer pass takes on at most, tenants in turn", positive(&c.CompleterBatch)},
		{"ORDER_HOLD", "order-hold", "30m", "how long an unpaid order holds its stock after its last attempt before it expires", duration(&c.OrderHold)},
		{"JOB_RESCUE_AFTER", "job-rescue-after", "1m", "how long a side-effect job taken by a process that died waits before it runs again", duration(&c.JobRescueAfter)},
		{"DB_POOL_SIZE", "db-pool-size", strconv.Itoa(models.PostgresPoolSize), "connections of the PostgreSQL pool (SQLite always has one)", positive(&c.DBPoolSize)},
		{"JOB_WORKERS", "job-workers", "0", "side-effect jobs run at once; 0 sizes them to the pool (half of it on PostgreSQL, 8 on SQLite)", atLeastZero(&c.JobWorkers)},
		{"WEBHOOK_SENDERS", "webhook-senders", strconv.Itoa(fakegateway.DefaultSenders), "webhooks the in-process gateway sends at once (one charge's stay in order)", positive(&c.WebhookSenders)},
		{"SHOP_CRASH_AT", "crash-at", "", "crash point for failure drills", crashPoint(&c.CrashAt)},
		{"SHOP_API_KEYS", "api-keys", "acme=sk_test_acme,globex=sk_test_globex", "demo API keys as tenant=key,… used when seeding", apiKeys(&c.APIKeys)},
		{"LOG_LEVEL", "log-level", "info", "debug, info, warn or error", oneOf(&c.LogLevel, "debug", "info", "warn", "error")},
	}
}

// loadConfig reads every setting from the environment through getenv, then from its flag in
// args (the flag wins), and parses it. A bad value fails with a message naming the variable.
// -h prints the usage to out and returns flag.ErrHelp.
func loadConfig(args []string, getenv func(string) string, out io.Writer) (stack.Config, error) {
	var cfg stack.Config
	table := settings(&cfg)
	fs := flag.NewFlagSet("shop", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { fmt.Fprintln(out, usage); fs.PrintDefaults() }
	flags := make([]*string, len(table))
	for i, s := range table {
		flags[i] = fs.String(s.flag, s.def, s.usage+" ("+s.env+")")
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for i, s := range table {
		v := s.def
		if env := strings.TrimSpace(getenv(s.env)); env != "" {
			v = env
		}
		if given[s.flag] {
			v = *flags[i]
		}
		if err := s.parse(v); err != nil {
			return cfg, fmt.Errorf("%s: %w", s.env, err)
		}
	}
	cfg.DemoSecrets = handlers.DemoValues{WebhookSecret: demoWebhookSecret, APIKeys: models.DefaultAPIKeys,
		GatewayControlToken: fakegateway.DemoControlToken}
	return cfg, nil
}

// The parsers. An error says what is wrong with the value; loadConfig puts the variable's
// name in front of it.

func text(dst *string) func(string) error {
	return func(v string) error { *dst = v; return nil }
}

func duration(dst *time.Duration) func(string) error {
	return func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%q: want a positive duration such as 30s or 24h", v)
		}
		*dst = d
		return nil
	}
}

func hostPort(dst *string) func(string) error {
	return func(v string) error {
		if _, _, err := net.SplitHostPort(v); err != nil {
			return fmt.Errorf("%q: want host:port, e.g. 127.0.0.1:8080", v)
		}
		*dst = v
		return nil
	}
}

func baseURL(dst *string) func(string) error {
	return func(v string) error { *dst = strings.TrimRight(v, "/"); return nil }
}

// publicURL defaults to http:// + the shop's address, and then follows the address the shop
// really listens on (SHOP_ADDR=…:0).
func publicURL(c *stack.Config) func(string) error {
	return func(v string) error {
		if v == "" {
			v, c.PublicURLFollowsAddr = "http://"+c.ShopAddr, true
		}
		c.ShopPublicURL = strings.TrimRight(v, "/")
		return nil
	}
}

func postgresURL(dst *string) func(string) error {
	return func(v string) error {
		if v != "" && !strings.HasPrefix(v, "postgres://") && !strings.HasPrefix(v, "postgresql://") {
			return errors.New("must be a postgres:// URL (leave it unset for the embedded SQLite database)")
		}
		*dst = v
		return nil
	}
}

func webhookSecret(dst *string) func(string) error {
	return func(v string) error {
		if !strings.HasPrefix(v, "whsec_") {
			return errors.New("must look like whsec_<base64>") // never echo a secret
		}
		*dst = v
		return nil
	}
}

// controlToken accepts what the fake gateway accepts as its control token: at least 16
// characters, each a letter, a digit or one of - . _ ~ (it travels in a URL and a header).
func controlToken(dst *string) func(string) error {
	return func(v string) error {
		unsafe := func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~", r))
		}
		if len(v) < 16 || strings.IndexFunc(v, unsafe) >= 0 {
			return errors.New("want at least 16 characters, each a letter, a digit or one of - . _ ~") // never echo a secret
		}
		*dst = v
		return nil
	}
}

// shopSecret accepts "" (the shop keeps a key in DATA_DIR) or a key of at least
// handlers.MinSecretBytes bytes.
func shopSecret(dst *string) func(string) error {
	return func(v string) error {
		if v != "" && len(v) < handlers.MinSecretBytes {
			return fmt.Errorf("want at least %d characters, e.g. the output of `openssl rand -base64 32`", handlers.MinSecretBytes)
		}
		*dst = v
		return nil
	}
}

func positive(dst *int) func(string) error {
	return func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("%q: want a whole number above 0", v)
		}
		*dst = n
		return nil
	}
}

func atLeastZero(dst *int) func(string) error {
	return func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%q: want a whole number, 0 or above", v)
		}
		*dst = n
		return nil
	}
}

func boolean(dst *bool) func(string) error {
	return func(v string) (err error) {
		if *dst, err = strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%q: want true or false", v)
		}
		return nil
	}
}

// oneOf accepts the values listed.
func oneOf(dst *string, values ...string) func(string) error {
	return func(v string) error {
		if !slices.Contains(values, v) {
			return fmt.Errorf("%q: use one of %s", v, strings.Join(values, ", "))
		}
		*dst = v
		return nil
	}
}

// crashPoint accepts a crash point of payments.CrashPoints, or "" for none.
func crashPoint(dst *string) func(string) error {
	return func(v string) error {
		if v != "" && !slices.Contains(payments.CrashPoints, v) {
			return fmt.Errorf("%q is not a crash point; use one of %s", v, strings.Join(payments.CrashPoints, ", "))
		}
		*dst = v
		return nil
	}
}

func apiKeys(dst *map[string]string) func(string) error {
	return func(v string) (err error) { *dst, err = parseAPIKeys(v); return err }
}

func parseAPIKeys(s string) (map[string]string, error) {
	keys := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		tenant, key, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || tenant == "" || len(key) < 8 {
			return nil, fmt.Errorf("%q is not tenant=key (keys have at least 8 characters)", pair)
		}
		keys[tenant] = key
	}
	for _, t := range []string{"acme", "globex"} {
		if keys[t] == "" {
			return nil, fmt.Errorf("must give a key for the demo tenant %s", t)
		}
	}
	return keys, nil
}
