package main

// The failure lab's runner and CLI. A run starts a fresh shop and gateway in this process —
// through start(), the same wiring as `go run ./cmd/shop` — with every protection on, or with
// the scenario's one protection off, plays the scenario's steps over HTTP (lab_client.go),
// lets background work settle and checks the invariants through the gateway's ledger and the
// shop's own views, over HTTP (lab_judge.go). A crash scenario runs its shop as a child process that
// really dies (lab_process.go). With --shop, the protected runs go to a shop that is already
// running instead.
//
//	go run ./cmd/shop lab list
//	go run ./cmd/shop lab run [--json] [--database-url postgres://…] [scenario …]
//	go run ./cmd/shop lab run --shop http://127.0.0.1:8080 [--gateway URL] [scenario …]

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/payments"
	"checkoutlab/payments/lab"
)

// labEnv is the environment of a lab stack: free ports, short timeouts (as in the tests), so
// that a failure resolves in seconds. Everything else is production's default.
var labEnv = map[string]string{
	"SHOP_ADDR":          "127.0.0.1:0",
	"GATEWAY_ADDR":       "127.0.0.1:0",
	"GATEWAY_TIMEOUT":    "1s",
	"IDEMPOTENCY_LEASE":  "2s",
	"COMPLETER_INTERVAL": "200ms",
	"JOB_RESCUE_AFTER":   "4s", // a receipt job taken by a killed shop runs again soon
	"LOG_LEVEL":          "warn",
}

// runLab is the `lab` subcommand.
func runLab(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "shop" {
		return runLabShop(ctx, args[1:], stdout) // a crash scenario's shop (lab_process.go)
	}
	if len(args) == 0 || (args[0] != "run" && args[0] != "list") {
		return errors.New("usage: shop lab list | shop lab run [--json] [--database-url URL | --shop URL [--gateway URL]] [scenario …]")
	}
	if args[0] == "list" {
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
	fs := flag.NewFlagSet("lab run", flag.ContinueOnError)
	fs.SetOutput(stdout)
	asJSON := fs.Bool("json", false, "print the results as JSON")
	dbURL := fs.String("database-url", "", "run on this PostgreSQL database; empty uses a fresh embedded SQLite database per run")
	shopURL := fs.String("shop", "", "run against this running shop instead (protected runs only), e.g. http://127.0.0.1:8080")
	gatewayURL := fs.String("gateway", "http://127.0.0.1:8081", "with --shop: the running shop's fake gateway")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	var running *labStack
	if *shopURL != "" {
		var err error
		if running, err = runningShop(*shopURL, *gatewayURL, os.Getenv); err != nil {
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
	var results []lab.Result
	failed := 0
	for _, s := range scenarios {
		if running != nil {
			if why := needsLabStack(s); why != "" {
				fmt.Fprintf(os.Stderr, "lab: %s skipped: %s\n", s.Name, why)
				continue
			}
			if !*asJSON {
				fmt.Fprintf(os.Stderr, "lab: %s (protected, against %s)…\n", s.Name, running.shop)
			}
			r := runScenarioOnShop(ctx, s, running)
			if !r.OK {
				failed++
			}
			results = append(results, r)
			continue
		}
		for _, mode := range []lab.Mode{lab.Protected, lab.Unprotected} {
			if !*asJSON {
				fmt.Fprintf(os.Stderr, "lab: %s (%s)…\n", s.Name, mode)
			}
			r := runScenario(ctx, s, mode, *dbURL, os.Stderr)
			if !r.OK {
				failed++
			}
			results = append(results, r)
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
	}
	if failed > 0 {
		return fmt.Errorf("lab: %d of %d runs did not get their verdict", failed, len(results))
	}
	return nil
}

func printResults(w io.Writer, results []lab.Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tMODE\tINVARIANTS\tVERDICT")
	for _, r := range results {
		var broken []string
		for _, c := range r.Checks {
			if !c.Holds {
				broken = append(broken, c.Invariant+" ("+c.Detail+")")
			}
		}
		inv := "all hold"
		switch {
		case r.Err != "":
			inv = "–" // the run failed before anything could be checked
		case len(broken) > 0:
			inv = "BROKEN " + strings.Join(broken, "; ")
		}
		if r.Unsettled != "" {
			inv += " (still unsettled " + r.Unsettled + ")"
		}
		mark := "ok"
		if !r.OK {
			mark = "FAIL"
		}
		mode := string(r.Mode)
		if r.Off != "" {
			mode += " (" + string(r.Off) + " off)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s: %s\n", r.Scenario, mode, inv, mark, r.Verdict)
	}
	tw.Flush()
}

// runScenario runs s once in mode on a fresh stack (databaseURL "" selects a fresh SQLite
// database in a temporary directory) and judges it. Lines of the stack's log that announce a
// lab stack are copied to logw.
func runScenario(ctx context.Context, s lab.Scenario, mode lab.Mode, databaseURL string, logw io.Writer) lab.Result {
	began := time.Now()
	r := lab.Result{Scenario: s.Name, Mode: mode, Database: models.SQLite}
	if databaseURL != "" {
		r.Database = models.Postgres
	}
	var p payments.Protections
	sameKey := true
	if mode == lab.Unprotected {
		r.Off = s.Switch
		if s.Switch == payments.SwitchClientSameKey {
			sameKey = false // a client behaviour: the server keeps every protection
		} else {
			p.Off = s.Switch
		}
	}
	start := func() (*labStack, error) { return startLabStack(ctx, databaseURL, p, logw) }
	if s.CrashAt != "" {
		start = func() (*labStack, error) { return startCrashStack(ctx, databaseURL, p, s.CrashAt, logw) }
	}
	st, err := start()
	if err != nil {
		r.Err = err.Error()
	} else {
		defer st.stop()
		playAndJudge(ctx, s, st, sameKey, &r)
	}
	r.Took = time.Since(began)
	lab.Judge(s, &r)
	return r
}

// runScenarioOnShop runs s with every protection on against a shop that is already running
// (`lab run --shop URL`): a production shop has no switches, so there is no unprotected run.
func runScenarioOnShop(ctx context.Context, s lab.Scenario, st *labStack) lab.Result {
	began := time.Now()
	r := lab.Result{Scenario: s.Name, Mode: lab.Protected, Shop: st.shop}
	playAndJudge(ctx, s, st, true, &r)
	// Leave no armed fault behind for the shop's real traffic.
	if req, err := http.NewRequestWithContext(ctx, http.MethodDelete, st.gateway+"/_control/faults", nil); err == nil {
		if res, err := st.http.Do(req); err == nil {
			res.Body.Close()
		}
	}
	r.Took = time.Since(began)
	lab.Judge(s, &r)
	return r
}

// playAndJudge plays s's steps against st with a fresh client, lets background work settle
// and fills r's invariants and timeline.
func playAndJudge(ctx context.Context, s lab.Scenario, st *labStack, sameKey bool, r *lab.Result) {
	client := &labClient{shop: st.shop, apiKeys: st.apiKeys, http: st.http, sameKey: sameKey,
		runID: models.NewID("run"), answers: map[string]map[string]bool{}, sent: map[string]bool{}}
	since := time.Now().UTC().Add(-time.Millisecond)
	err := func() error {
		for _, step := range s.Steps {
			if err := client.play(ctx, st, step); err != nil {
				return err
			}
		}
		r.Unsettled = st.settle(ctx, since, client.email())
		var err error
		r.Checks, r.Timeline, err = st.evaluate(ctx, s, since, client)
		return err
	}()
	if err != nil {
		r.Err = err.Error()
	}
}

// runningShop is the stack of `lab run --shop URL`: a shop someone started, with its
// gateway. The API keys are the shop's own setting, SHOP_API_KEYS (the demo keys unless set).
func runningShop(shopURL, gatewayURL string, getenv func(string) string) (*labStack, error) {
	cfg, err := loadConfig(nil, getenv, io.Discard)
	if err != nil {
		return nil, err
	}
	st := &labStack{shop: strings.TrimRight(shopURL, "/"), gateway: strings.TrimRight(gatewayURL, "/"),
		apiKeys: cfg.APIKeys, http: &http.Client{Timeout: 30 * time.Second},
		// Production leases and intervals: the completer may take a lease and more to step in.
		settleWithin: 2*cfg.IdempotencyLease + cfg.CompleterInterval + 2*cfg.GatewayTimeout,
		stop:         func() {}}
	for _, u := range []string{st.shop + "/healthz", st.gateway + "/_control/faults"} {
		var ignored any
		if err := getJSON(context.Background(), st.http, u, "", &ignored); err != nil {
			return nil, fmt.Errorf("lab: is the shop running? %w", err)
		}
	}
	return st, nil
}

// needsLabStack says why s cannot run against a running shop, or "" if it can: a crash point
// and an early reaper run need a shop the lab started itself.
func needsLabStack(s lab.Scenario) string {
	if s.CrashAt != "" {
		return "it kills the shop at a crash point"
	}
	for _, step := range s.Steps {
		if step.ExpireKeys {
			return "it runs the reaper early, behind the shop's back"
		}
	}
	return ""
}

// labStack is a running shop with its gateway: a lab stack started for one run, or a shop
// that was already running (--shop).
type labStack struct {
	shop, gateway string
	apiKeys       map[string]string
	// db is a second handle on a lab stack's database, for the one thing the lab does behind
	// the shop's back: running the reaper early (ExpireKeys). nil for a running shop.
	db *gorm.DB
	// http is the lab's own HTTP client. Its idle connections are closed before the stack
	// stops: a connection dialled but never used would hold the shop's shutdown for 5s.
	http *http.Client
	stop func()
	// restart waits for a crashed shop to have died and starts it again; it returns when the
	// shop died (crash scenarios only; see lab_process.go).
	restart func(context.Context) (time.Time, error)
	crashAt string
	// settleWithin bounds the wait for background work after the steps: a lab stack's
	// leases and intervals are short, a running shop's are production's (a 30s lease).
	settleWithin time.Duration
}

func startLabStack(ctx context.Context, databaseURL string, p payments.Protections, logw io.Writer) (*labStack, error) {
	dir, err := os.MkdirTemp("", "checkoutlab-lab-")
	if err != nil {
		return nil, err
	}
	env := map[string]string{"DATA_DIR": dir, "DATABASE_URL": databaseURL}
	for k, v := range labEnv {
		env[k] = v
	}
	cfg, err := loadConfig(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cfg.protections = p

	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	// done is closed when start returns, with its error in startErr: stop and the wait for
	// readiness both watch it.
	done := make(chan struct{})
	var startErr error
	go func() {
		startErr = start(ctx, "serve", cfg, pw)
		pw.CloseWithError(io.EOF)
		close(done)
	}()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	st := &labStack{apiKeys: cfg.APIKeys, http: &http.Client{Transport: transport, Timeout: 30 * time.Second},
		settleWithin: 10 * time.Second}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, "FAILURE LAB STACK") {
				fmt.Fprintln(logw, line)
			}
			if _, rest, ok := strings.Cut(line, "fake gateway listening on "); ok {
				st.gateway = strings.Fields(rest)[0]
			}
			if _, rest, ok := strings.Cut(line, "shop listening on "); ok {
				st.shop = strings.Fields(rest)[0]
				close(ready)
			}
		}
		io.Copy(io.Discard, pr)
	}()
	st.stop = func() {
		if st.db != nil {
			models.Close(st.db)
		}
		transport.CloseIdleConnections()
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
		}
		os.RemoveAll(dir)
	}
	select {
	case <-ready:
	case <-done:
		st.stop()
		return nil, fmt.Errorf("lab stack ended before listening: %v", startErr)
	case <-time.After(30 * time.Second):
		st.stop()
		return nil, errors.New("lab stack did not start within 30s")
	}
	if st.db, err = models.Open(ctx, databaseURL, dir, "shop.db"); err != nil {
		st.stop()
		return nil, err
	}
	return st, nil
}
