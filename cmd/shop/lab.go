package main

// The failure lab's runner and CLI. A run starts a fresh shop and gateway in this process —
// through start(), the same wiring as `go run ./cmd/shop` — with every protection on, or with
// the scenario's one protection off, plays the scenario's steps over HTTP, lets background
// work settle and checks the invariants against the gateway's ledger and the shop's database.
//
//	go run ./cmd/shop lab list
//	go run ./cmd/shop lab run [--json] [--database-url postgres://…] [scenario …]

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
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
	"LOG_LEVEL":          "warn",
}

// runLab is the `lab` subcommand.
func runLab(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "shop" {
		return runLabShop(ctx, args[1:], stdout) // a crash scenario's shop (lab_process.go)
	}
	if len(args) == 0 || (args[0] != "run" && args[0] != "list") {
		return errors.New("usage: shop lab list | shop lab run [--json] [--database-url URL] [scenario …]")
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
	if err := fs.Parse(args[1:]); err != nil {
		return err
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
		if len(broken) > 0 {
			inv = "BROKEN " + strings.Join(broken, "; ")
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
	client := labClient{sameKey: true}
	if mode == lab.Unprotected {
		r.Off = s.Switch
		if s.Switch == payments.SwitchClientSameKey {
			client.sameKey = false // a client behaviour: the server keeps every protection
		} else {
			p.Off = s.Switch
		}
	}
	err := func() error {
		start := func() (*labStack, error) { return startLabStack(ctx, databaseURL, p, logw) }
		if s.CrashAt != "" {
			start = func() (*labStack, error) { return startCrashStack(ctx, databaseURL, p, s.CrashAt, logw) }
		}
		st, err := start()
		if err != nil {
			return err
		}
		defer st.stop()
		client.shop, client.apiKeys, client.http = st.shop, st.apiKeys, st.http
		client.journal = models.NewJournalStore(st.db, slog.New(slog.DiscardHandler))
		client.runID = models.NewID("run")
		client.answers, client.sent = map[string]map[string]bool{}, map[string]bool{}
		since := time.Now().UTC().Add(-time.Millisecond)
		for _, step := range s.Steps {
			if err := client.play(ctx, st, step); err != nil {
				return err
			}
		}
		st.settle(ctx, since)
		r.Checks, r.Timeline, err = st.evaluate(ctx, s, since, client.answers)
		return err
	}()
	if err != nil {
		r.Err = err.Error()
	}
	r.Took = time.Since(began)
	lab.Judge(s, &r)
	return r
}

// labStack is a running shop with its in-process gateway.
type labStack struct {
	shop, gateway string
	apiKeys       map[string]string
	db            *gorm.DB // a second handle on the shop's database, to check what it holds
	// http is the lab's own HTTP client. Its idle connections are closed before the stack
	// stops: a connection dialled but never used would hold the shop's shutdown for 5s.
	http *http.Client
	stop func()
	// restart starts a crashed shop again (crash scenarios only; see lab_process.go).
	restart func(context.Context) error
	crashAt string
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
	done := make(chan error, 1)
	go func() {
		err := start(ctx, "serve", cfg, pw)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	st := &labStack{apiKeys: cfg.APIKeys, http: &http.Client{Transport: transport, Timeout: 30 * time.Second}}
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
	case err := <-done:
		st.stop()
		return nil, fmt.Errorf("lab stack ended before listening: %v", err)
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

// settle waits, at most 10s, until the gateway has no webhook delivery left to make, no
// operation of the run is left in progress (the completer finishes abandoned ones once their
// lease runs out) and every paid order of the run has its receipt, then a little longer for
// stragglers (duplicates).
func (st *labStack) settle(ctx context.Context, since time.Time) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var d struct {
			Deliveries []struct{ Status string } `json:"deliveries"`
		}
		pending := 0
		if err := getJSON(st.http, st.gateway+"/_control/deliveries", &d); err == nil {
			for _, x := range d.Deliveries {
				if x.Status == "pending" {
					pending++
				}
			}
		}
		var unreceipted int64
		st.db.WithContext(ctx).Model(&models.Order{}).
			Where("created_at >= ? AND status = ? AND id NOT IN (?)", since, models.OrderPaid,
				st.db.Model(&models.MailboxMessage{}).Select("order_id")).
			Count(&unreceipted)
		var unfinished int64
		st.db.WithContext(ctx).Model(&models.IdempotencyRecord{}).
			Where("created_at >= ? AND state = ?", since, models.KeyInProgress).Count(&unfinished)
		if pending == 0 && unreceipted == 0 && unfinished == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // duplicate jobs and the journal's batch writer
}

// labCharge is a gateway ledger entry, as much as the invariants need.
type labCharge struct {
	ID       string            `json:"id"`
	Status   string            `json:"status"`
	Metadata map[string]string `json:"metadata"`
}

// evaluate checks the invariants over the orders created since the run began, and returns
// their journal as the timeline.
func (st *labStack) evaluate(ctx context.Context, s lab.Scenario, since time.Time, answers map[string]map[string]bool) ([]lab.Check, []lab.Row, error) {
	var ledger struct{ Charges []labCharge }
	if err := getJSON(st.http, st.gateway+"/_control/ledger", &ledger); err != nil {
		return nil, nil, fmt.Errorf("read the gateway ledger: %w", err)
	}
	var orders []models.Order
	if err := st.db.WithContext(ctx).Where("created_at >= ?", since).Order("created_at").Find(&orders).Error; err != nil {
		return nil, nil, fmt.Errorf("read orders: %w", err)
	}
	ids := make([]string, 0, len(orders))
	for _, o := range orders {
		ids = append(ids, o.ID)
	}
	var pays []models.Payment
	if len(ids) > 0 {
		if err := st.db.WithContext(ctx).Where("order_id IN ?", ids).Find(&pays).Error; err != nil {
			return nil, nil, fmt.Errorf("read payments: %w", err)
		}
	}
	receipts, _, err := models.NewSideEffectStore(st.db).CountByOrder(ctx, ids)
	if err != nil {
		return nil, nil, err
	}

	moneyMoved := func(c labCharge) bool { return c.Status == "succeeded" || c.Status == "refunded" }
	chargesOf, chargedPayment := map[string]int{}, map[string]bool{}
	total := 0
	for _, c := range ledger.Charges {
		if moneyMoved(c) {
			chargesOf[c.Metadata["order_id"]]++
			chargedPayment[c.Metadata["payment_id"]] = true
		}
	}
	maxCharges := 0
	for _, id := range ids {
		maxCharges = max(maxCharges, chargesOf[id])
		total += chargesOf[id]
	}
	maxOrders := 0
	for _, set := range answers {
		maxOrders = max(maxOrders, len(set))
	}
	paid, badReceipts := 0, []string{}
	for _, o := range orders {
		if o.Status == models.OrderPaid {
			paid++
			if receipts[o.ID] != 1 {
				badReceipts = append(badReceipts, fmt.Sprintf("%d", receipts[o.ID]))
			}
		}
	}
	var behind []string
	for _, p := range pays {
		if chargedPayment[p.ID] && p.Status != models.PaymentSucceeded && p.Status != models.PaymentRefunded {
			behind = append(behind, p.Status)
		}
	}

	checks := []lab.Check{
		{Invariant: lab.ChargesPerOrder, Holds: maxCharges <= 1,
			Detail: fmt.Sprintf("at most %d succeeded charge(s) on one order, %d in all (want ≤ 1 per order)", maxCharges, total)},
		{Invariant: lab.OrdersPerKey, Holds: maxOrders <= 1,
			Detail: fmt.Sprintf("at most %d order(s) answered under one key (want ≤ 1)", maxOrders)},
		{Invariant: lab.PaidOrders, Holds: paid == s.PaidOrders,
			Detail: fmt.Sprintf("%d paid order(s) of %d created (want %d)", paid, len(orders), s.PaidOrders)},
		{Invariant: lab.ReceiptsPerPaidOrder, Holds: len(badReceipts) == 0,
			Detail: receiptDetail(paid, badReceipts)},
		{Invariant: lab.StatusMatchesGateway, Holds: len(behind) == 0,
			Detail: statusDetail(behind)},
	}

	journal := models.NewJournalStore(st.db, nil)
	var rows []lab.Row
	seen := map[int64]bool{} // orders sharing a key share that key's events: show each once
	for _, id := range ids {
		evs, err := journal.ForOrder(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		for _, ev := range evs {
			if seen[ev.ID] {
				continue
			}
			seen[ev.ID] = true
			rows = append(rows, lab.Row{At: ev.At, Actor: ev.Actor, Kind: ev.Kind, Key: ev.IdempotencyKey, Order: ev.OrderID, Detail: ev.Detail})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].At.Before(rows[j].At) })
	return checks, rows, nil
}

func receiptDetail(paid int, bad []string) string {
	if len(bad) == 0 {
		return fmt.Sprintf("each of %d paid order(s) has one receipt", paid)
	}
	return fmt.Sprintf("%d paid order(s) with receipts %s (want 1 each)", len(bad), strings.Join(bad, ", "))
}

func statusDetail(behind []string) string {
	if len(behind) == 0 {
		return "every payment charged at the gateway shows succeeded"
	}
	return fmt.Sprintf("%d payment(s) charged at the gateway show %s (want succeeded)", len(behind), strings.Join(behind, ", "))
}

func getJSON(client *http.Client, url string, v any) error {
	res, err := client.Get(url)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", url, res.StatusCode)
	}
	return json.NewDecoder(res.Body).Decode(v)
}
