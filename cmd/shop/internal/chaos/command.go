package chaos

import (
	"checkoutlab/payments/lab"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"checkoutlab/payments"
	"checkoutlab/web/components"
)

const usage = `usage: shop lab chaos [--seed N] [--purchases N] [--clients N] [--replicas N] [--off SWITCH]
                      [--database-url URL] [--json]

Runs randomized purchases on a fresh stack: N shop replicas on one database behind a load
balancer, the gateway beside them, and a schedule made from the seed of gateway faults,
webhook faults, replica kills (SIGKILL, then a restart) and crash points. The clients retry
with the same key, as checkout.js does. Once the stack has settled, the failure lab's
invariants judge the run from the gateway's ledger and the shop's records.

It exits 0 if the verdict is the one expected: with every protection on, no double charge and
nothing lost; with --off SWITCH, that switch's harm appears. The same seed and flags give the
same schedule.

flags:`

// Command is `shop lab chaos` with args. lab.ChaosProgress goes to stderr, the result to stdout.
func (r *Runner) Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("shop lab chaos", flag.ContinueOnError)
	fs.SetOutput(stdout)
	var o lab.ChaosOptions
	fs.Int64Var(&o.Seed, "seed", 1, "the seed the schedule is made from")
	fs.IntVar(&o.Purchases, "purchases", lab.ChaosDefaultPurchases, "how many purchases the customers make")
	fs.IntVar(&o.Clients, "clients", lab.ChaosDefaultClients, "how many customers buy at once")
	fs.IntVar(&o.Replicas, "replicas", lab.ChaosDefaultReplicas, "how many shop replicas serve behind the load balancer")
	off := fs.String("off", "", "the one protection to turn off: "+switchList())
	fs.StringVar(&o.DatabaseURL, "database-url", "", "run on this PostgreSQL database; empty uses a fresh embedded SQLite database")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stdout, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("lab chaos takes no argument, got %q", fs.Arg(0))
	}
	o.Off = payments.Switch(*off)
	if err := o.Check(); err != nil {
		return err
	}
	var mu sync.Mutex // the customers report from their own goroutines
	last := time.Time{}
	report := func(p lab.ChaosProgress) {
		mu.Lock()
		defer mu.Unlock()
		if *asJSON || time.Since(last) < 2*time.Second && p.Done < p.Total && p.Phase == "purchasing" {
			return
		}
		last = time.Now()
		fmt.Fprintf(stderr, "chaos: %s: %d/%d purchases, %d faults armed, %d replica kills\n", p.Phase, p.Done, p.Total, p.Faults, p.Kills)
	}
	res, err := r.Run(ctx, o, report, stderr)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		PrintSummary(stdout, res)
	}
	if !res.OK {
		return errors.New("chaos: " + res.Verdict)
	}
	return nil
}

// PrintSummary writes res as a short table.
func PrintSummary(w io.Writer, res *lab.ChaosResult) {
	off := string(res.Off)
	if off == "" {
		off = "none (every protection on)"
	}
	over := "nothing"
	if len(res.Overcharged) > 0 {
		var m []string
		for _, x := range res.Overcharged {
			m = append(m, components.Money(x.Amount, x.Currency))
		}
		over = strings.Join(m, " + ")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "seed\t%d\n", res.Seed)
	fmt.Fprintf(tw, "stack\t%d replicas, %d clients, %s\n", res.Replicas, res.Clients, res.Database)
	fmt.Fprintf(tw, "protection off\t%s\n", off)
	fmt.Fprintf(tw, "purchases\t%d: %d answered (%d declined), %d gave up\n", res.Purchases, res.Answered, res.Declined, res.GaveUp)
	fmt.Fprintf(tw, "struck\t%d gateway faults, %d replica kills, %d POSTs retried by the load balancer\n", res.Faults, res.Kills, res.ProxyRetries)
	fmt.Fprintf(tw, "double charges\t%d (overcharged: %s)\n", res.DoubleCharges, over)
	fmt.Fprintf(tw, "duplicate orders\t%d (suspected duplicate purchases for review: %d)\n", res.DuplicateOrders, res.SuspectedDuplicates)
	fmt.Fprintf(tw, "lost\t%d\n", res.Lost)
	fmt.Fprintf(tw, "duplicate receipts\t%d\n", res.DuplicateReceipts)
	fmt.Fprintf(tw, "status behind gateway\t%d\n", res.StatusRegressed)
	for _, p := range res.Problems {
		fmt.Fprintf(tw, "lab problem\t%s\n", p)
	}
	if res.Unsettled != "" {
		fmt.Fprintf(tw, "still unsettled\t%s\n", res.Unsettled)
	}
	fmt.Fprintf(tw, "took\t%s\n", res.Took.Round(100*time.Millisecond))
	mark := "ok"
	if !res.OK {
		mark = "FAIL"
	}
	fmt.Fprintf(tw, "verdict\t%s: %s\n", mark, res.Verdict)
	tw.Flush()
}

func switchList() string {
	var names []string
	for _, s := range payments.Switches {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}
