// Command shop runs Checkout Lab: the storefront, the JSON API and, unless GATEWAY_URL points
// at an external one, the fake payment gateway in the same process.
//
//	go run ./cmd/shop            serve (migrates and seeds demo data first)
//	go run ./cmd/shop migrate    apply database migrations and exit
//	go run ./cmd/shop reset      put the demo catalogue and stock back and exit
//	go run ./cmd/shop lab …      the failure lab: list, run (cmd/shop/internal/labrun), chaos (internal/chaos)
//	go run ./cmd/shop bench      the load benchmark (cmd/shop/internal/bench)
//
// This package is the program's dispatch (main.go), its configuration (config.go) and what
// the shop is made of (wire.go). Starting and stopping a whole stack is package
// internal/stack; the failure lab is package internal/labrun.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"checkoutlab/cmd/shop/internal/bench"
	"checkoutlab/cmd/shop/internal/chaos"
	"checkoutlab/cmd/shop/internal/labrun"
	"checkoutlab/cmd/shop/internal/stack"
	"checkoutlab/fakegateway"
	"checkoutlab/models"
	"checkoutlab/telemetry"
)

const usage = `usage: shop [serve | migrate | reset] [flags]
       shop lab list | run | chaos | shop …
       shop bench [--duration D] [--clients N] [--database-url URL] [--json]

commands:
  serve     the shop, and the fake gateway unless GATEWAY_URL is set (the default command)
  migrate   apply the database migrations and exit
  reset     put every demo store's catalogue, prices and stock back as seeded, and exit;
            orders, receipts and journals are kept (the shop may keep running)
  lab       the failure lab: its scenarios, run with a protection on and off (shop lab -h)
  bench     the load benchmark on fresh stacks: protected against unprotected, replays, one
            key under contention, backlog, database counters (shop bench -h)

flags of serve, migrate and reset; each mirrors the environment variable in brackets, and wins over it:`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp): // the usage asked for is printed
	case err != nil:
		fmt.Fprintln(os.Stderr, "shop:", err)
		os.Exit(1)
	}
}

// run is the whole program: it dispatches to the command that args name, configured from
// getenv and args, until ctx is cancelled.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	command := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		command, args = args[0], args[1:]
	}
	switch command {
	case "serve", "migrate", "reset":
	case "lab":
		lab := labRunner("")
		lab.Getenv = getenv
		return lab.Command(ctx, args, stdout, os.Stderr)
	case "bench":
		b := &bench.Runner{Wire: mountRoutes,
			Config: func(getenv func(string) string) (stack.Config, error) { return loadConfig(nil, getenv, io.Discard) }}
		return b.Command(ctx, args, stdout, os.Stderr)
	default:
		return fmt.Errorf("unknown command %q; see shop -h", command)
	}
	cfg, err := loadConfig(args, getenv, stdout)
	if err != nil {
		return err
	}
	switch command {
	case "migrate":
		db, err := stack.Migrate(ctx, cfg)
		if err != nil {
			return err
		}
		defer models.Close(db)
		fmt.Fprintf(stdout, "migrations applied (%s)\n", models.Dialect(db))
		return nil
	case "reset":
		return reset(ctx, cfg, stdout)
	}
	return serve(ctx, cfg, stdout)
}

// reset puts the demo catalogue back on cfg's database (migrated first), as the operator
// bar's Reset demo does: the same models.ResetDemo, with the shop running or not.
func reset(ctx context.Context, cfg stack.Config, stdout io.Writer) error {
	db, err := stack.Migrate(ctx, cfg)
	if err != nil {
		return err
	}
	defer models.Close(db)
	tenants := models.DemoTenants(cfg.APIKeys)
	restored, err := models.ResetDemo(ctx, db, tenants)
	if err != nil {
		return err
	}
	ids := make([]string, len(tenants))
	for i, t := range tenants {
		ids[i] = t.ID
	}
	fmt.Fprintf(stdout, "demo reset (%s): %d products of %s restored with their prices and stock; orders, receipts and journals kept\n",
		models.Dialect(db), restored, strings.Join(ids, " and "))
	return nil
}

// serve runs the stack cfg describes, logging to stdout, until ctx ends; then it shuts the
// stack down gracefully.
func serve(ctx context.Context, cfg stack.Config, stdout io.Writer) error {
	cfg.LogOutput = stdout
	cfg.Lab = labRunner("")
	// Traces go to OTEL_EXPORTER_OTLP_ENDPOINT when it is set, and are off otherwise
	// (docs/traces.md). Here and not in stack.Start: a test or `shop bench` installs its own
	// TracerProvider before it starts stacks.
	stopTracing, err := telemetry.Setup(ctx, "shop")
	if err != nil {
		return err
	}
	defer func() {
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTracing(flush); err != nil {
			fmt.Fprintln(stdout, "checkoutlab: flush traces:", err)
		}
	}()
	st, err := stack.Start(ctx, cfg, mountRoutes)
	if err != nil {
		return err
	}
	if cfg.GatewayURL == "" {
		// The page's login link carries the token only while it is the published demo value:
		// a token of the operator's own never reaches the log.
		page := st.GatewayURL() + "/?token=<GATEWAY_CONTROL_TOKEN>, or Payment gateway in the operator bar"
		if cfg.GatewayControlToken == fakegateway.DemoControlToken {
			page = st.GatewayURL() + "/?token=" + cfg.GatewayControlToken
		}
		fmt.Fprintf(stdout, "checkoutlab: fake gateway listening on %s (its page: %s)\n", st.GatewayURL(), page)
	}
	fmt.Fprintf(stdout, "checkoutlab: shop listening on %s (database: %s)\n", st.URL(), st.Dialect())
	return errors.Join(st.Wait(ctx), st.Close())
}

// labRunner is the failure lab, whose stacks are this shop: its configuration and its wiring.
// Its crash scenarios run exe as their shop, "" for this very program.
func labRunner(exe string) *labrun.Runner {
	r := &labrun.Runner{Exe: exe, Wire: mountRoutes,
		Config: func(getenv func(string) string) (stack.Config, error) { return loadConfig(nil, getenv, io.Discard) }}
	r.Chaos = (&chaos.Runner{Lab: r}).Command
	return r
}
