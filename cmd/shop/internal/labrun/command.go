package labrun

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"checkoutlab/payments/lab"
	"checkoutlab/web/components"
)

const usage = `usage: shop lab list | shop lab run [--json | --verbose | --timeline] [--seed N] [--database-url URL | --shop URL [--gateway URL]] [scenario …]
       shop lab chaos [flags]

  list   the scenarios, with the protection each one is about and what breaks without it
  run    run scenarios (all by default) twice each on a fresh stack: with every protection on,
         and with the scenario's one protection off; see shop lab run -h
  chaos  randomized purchases on several replicas, with faults and kills; see shop lab chaos -h
  shop   a crash scenario's shop, which lab run starts as a child process; see shop lab shop -h`

// Command is `shop lab` with args: list, run, or shop (a crash scenario's child process).
// Progress goes to stderr, results to stdout. -h on any of them returns flag.ErrHelp after
// printing its usage to stdout.
func (r *Runner) Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("shop lab", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() { fmt.Fprintln(stdout, usage) }
	if err := fs.Parse(args); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "list":
		return list(args[1:], stdout)
	case "run":
		return r.run(ctx, args[1:], stdout, stderr)
	case "shop":
		return r.serveChild(ctx, args[1:], stdout)
	case "chaos":
		if r.Chaos != nil {
			return r.Chaos(ctx, args[1:], stdout, stderr)
		}
	}
	return errors.New(usage)
}

// list is `shop lab list`.
func list(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("shop lab list", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintln(stdout, "usage: shop lab list\n\nLists the failure lab's scenarios: each one's protection and what breaks without it.")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("lab list takes no argument, got %q", fs.Arg(0))
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SCENARIO\tTITLE\tPROTECTION\tBREAKS WITHOUT IT")
	for _, s := range lab.Scenarios {
		breaks := s.Breaks
		if breaks == "" {
			breaks = "(nothing: a boundary)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", s.Name, s.Title, s.Switch, breaks)
	}
	return w.Flush()
}

// run is `shop lab run`.
func (r *Runner) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("shop lab run", flag.ContinueOnError)
	fs.SetOutput(stdout)
	asJSON := fs.Bool("json", false, "print the runs as one JSON array, in the schema of /lab/runs/{id}.json")
	verbose := fs.Bool("verbose", false, "after the table, every run's invariants with their numbers")
	timeline := fs.Bool("timeline", false, "after the table, every run's timeline as a sequence diagram in text")
	seed := fs.Int64("seed", 0, "the seed of the runs' keys and customer (a run's page shows its seed); 0 picks one per run")
	dbURL := fs.String("database-url", "", "run on this PostgreSQL database; empty uses a fresh embedded SQLite database per run")
	shopURL := fs.String("shop", "", "run against this running shop instead (protected runs only), e.g. http://127.0.0.1:8080")
	gatewayURL := fs.String("gateway", "http://127.0.0.1:8081", "with --shop: the running shop's fake gateway")
	fs.Usage = func() {
		fmt.Fprintln(stdout, "usage: shop lab run [--json | --verbose | --timeline] [--seed N] [--database-url URL | --shop URL [--gateway URL]] [scenario …]\n\n"+
			"Runs the scenarios named (every one by default) with every protection on and with the\n"+
			"scenario's one protection off, each on a fresh stack, and judges both runs. It exits\n"+
			"non-zero if a verdict is wrong.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	var running *target
	if *shopURL != "" {
		var err error
		if running, err = r.runningShop(*shopURL, *gatewayURL); err != nil {
			return err
		}
	}
	scenarios := lab.Scenarios
	if fs.NArg() > 0 {
		scenarios = nil
		for _, name := range fs.Args() {
			s, ok := lab.Find(name)
			if !ok {
				return fmt.Errorf("no scenario %q; see `shop lab list`", name)
			}
			scenarios = append(scenarios, s)
		}
	}
	runner := *r
	runner.DatabaseURL = *dbURL
	runner.Seed = *seed
	if runner.Log == nil {
		runner.Log = stderr
	}
	var results []lab.Result
	failed := 0
	for _, s := range scenarios {
		if running != nil {
			if why := needsLabStack(s); why != "" {
				fmt.Fprintf(stderr, "lab: %s skipped: %s\n", s.Name, why)
				continue
			}
			if !*asJSON {
				fmt.Fprintf(stderr, "lab: %s (protected, against %s)…\n", s.Name, running.shop)
			}
			res := runOnShop(ctx, s, running)
			if !res.OK {
				failed++
			}
			results = append(results, res)
			continue
		}
		for _, mode := range []lab.Mode{lab.Protected, lab.Unprotected} {
			if !*asJSON {
				fmt.Fprintf(stderr, "lab: %s (%s)…\n", s.Name, mode)
			}
			res := runner.RunScenario(ctx, s, mode)
			if !res.OK {
				failed++
			}
			results = append(results, res)
		}
	}
	if running != nil && len(results) == 0 {
		return errors.New("lab: no scenario can run against a running shop")
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			return err
		}
	} else {
		printResults(stdout, results)
		if *verbose {
			printDetails(stdout, results)
		}
		if *timeline {
			for _, r := range results {
				fmt.Fprintf(stdout, "\n%s (%s)\n", r.Scenario, r.Mode)
				printTimeline(stdout, r)
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("lab: %d of %d runs did not get their verdict", failed, len(results))
	}
	return nil
}

// tableWidth is the widest line of the default table: it fits a terminal of 100 columns.
const tableWidth = 100

// printResults prints one line per run: ✓ if its verdict is right, the scenario, the mode,
// what happened to the customer in money, and the verdict's first words.
func printResults(w io.Writer, results []lab.Result) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, " \tSCENARIO\tMODE\tWHAT HAPPENED\tVERDICT")
	for _, r := range results {
		mark := "✓"
		if !r.OK {
			mark = "✗"
		}
		mode := "on"
		if r.Mode == lab.Unprotected {
			mode = "off"
		}
		verdict, _, _ := strings.Cut(r.Verdict, ":")
		if r.Unsettled != "" {
			verdict += " (unsettled)"
		}
		// The headline is cut so that the verdict stays on the line; --verbose has it whole.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", mark, r.Scenario, mode, clip(lab.Headline(r, components.Money), 44), verdict)
	}
	tw.Flush()
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		fmt.Fprint(w, clip(line, tableWidth))
	}
}

// clip cuts line (with its newline) to width runes, ending in "…".
func clip(line string, width int) string {
	text, nl := strings.CutSuffix(line, "\n")
	text = strings.TrimRight(text, " ")
	if r := []rune(text); len(r) > width {
		text = string(r[:width-1]) + "…"
	}
	if nl {
		return text + "\n"
	}
	return text
}

// printDetails is --verbose: every run's invariants, and what was still going on.
func printDetails(w io.Writer, results []lab.Result) {
	for _, r := range results {
		fmt.Fprintf(w, "\n%s (%s): %s\n  %s\n", r.Scenario, r.Mode, r.Verdict, lab.Headline(r, components.Money))
		if r.Err != "" {
			fmt.Fprintf(w, "  error: %s\n", r.Err)
		}
		for _, c := range r.Checks {
			mark := "✓"
			if !c.Holds {
				mark = "✗"
			}
			fmt.Fprintf(w, "  %s %s: %s\n", mark, c.Invariant, c.Detail)
		}
		if r.Unsettled != "" {
			fmt.Fprintf(w, "  still unsettled %s\n", r.Unsettled)
		}
	}
}
