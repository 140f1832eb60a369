// Package bench is `shop bench` (CONTRACT.md section 12): a load benchmark of the whole shop,
// run in this process on fresh stacks (package stack, with the shop's own wiring).
//
// It measures every figure in rounds that interleave the variants — protected, unprotected,
// protected, … — so that the drift of a shared machine hits both alike, and reports the
// median of the per-round figures and ratios with their range. The phases:
//
//   - creation: POST /api/v1/checkout and POST /api/v1/orders at 1 and N clients, with every
//     protection on and with the lab switch server_idempotency off (the baseline);
//   - replay: the same key sent again, against creation;
//   - same key: twenty requests on one fresh key at once, by clients that honour Retry-After,
//     with and without "Prefer: wait=2";
//   - phase timing: the time per span name from OpenTelemetry, in a short window of its own;
//   - database counters (PostgreSQL): commits and rows per checkout, from pg_stat;
//   - sustained: N clients for a while on a fresh stack, then the backlog of webhook
//     deliveries and jobs, and how long it takes to drain; with the process's memory.
//
// Targets of issue 16 are reported beside the figures, never asserted.
package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"checkoutlab/cmd/shop/internal/stack"
)

const usage = `usage: shop bench [--duration D] [--clients N] [--database-url URL] [--json]

Measures the shop under load on fresh stacks in this process: checkout and order creation
with every protection on against server_idempotency off, replays, twenty requests on one key,
a sustained phase with the webhook and job backlog at its end, and (PostgreSQL) commits and
rows per checkout. Figures are medians of interleaved rounds with their range. See
docs/benchmarks.md.

flags:`

// Runner runs `shop bench`. Wire and Config are the shop's own, given by cmd/shop.
type Runner struct {
	// Wire is the shop's wiring: every stack the benchmark starts is the real shop.
	Wire stack.Wire
	// Config loads a stack's configuration from an environment, as `shop serve` does.
	Config func(getenv func(string) string) (stack.Config, error)
	// DatabaseURL is the PostgreSQL server on which each stack gets a fresh database; ""
	// gives each stack a fresh SQLite file.
	DatabaseURL string
	// Stderr receives the progress line; nil is os.Stderr.
	Stderr io.Writer

	adminMu sync.Mutex
	adminDB *sql.DB // see admin
}

// Options are the flags of one run.
type Options struct {
	Duration time.Duration // the budget of the whole run, shared among its phases
	Clients  int
	JSON     bool
}

// Command is `shop bench args…`: it parses the flags, runs the benchmark and prints its
// report (or its JSON) to stdout.
func (r *Runner) Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("shop bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, usage); fs.PrintDefaults() }
	var o Options
	fs.DurationVar(&o.Duration, "duration", 4*time.Minute, "the budget of the whole run, divided among its phases and rounds")
	fs.IntVar(&o.Clients, "clients", 8, "concurrent clients of the multi-client measurements")
	fs.StringVar(&r.DatabaseURL, "database-url", "", "a PostgreSQL server (postgres://…) on which each stack gets a fresh database, dropped after; empty uses SQLite files")
	fs.BoolVar(&o.JSON, "json", false, "print the figures as one JSON object instead of the text report")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected argument %q", fs.Arg(0))
	}
	if o.Duration <= 0 || o.Clients < 1 {
		return fmt.Errorf("bench: --duration must be positive and --clients at least 1")
	}
	r.Stderr = stderr
	res, err := r.Run(ctx, o)
	if err != nil {
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return writeReport(stdout, res)
}

func (r *Runner) stderr() io.Writer {
	if r.Stderr == nil {
		return os.Stderr
	}
	return r.Stderr
}
