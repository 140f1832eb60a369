package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
	"checkoutlab/payments/lab"
	"checkoutlab/web/components"
	"checkoutlab/web/layout"
	"checkoutlab/web/pages"
)

// LabRunner lists the failure lab's scenarios and runs one on a fresh stack. cmd/shop's
// lab runner is one.
type LabRunner interface {
	Scenarios() []lab.Scenario
	Run(ctx context.Context, name string, mode lab.Mode) (lab.Result, error)
}

// LabRunStore keeps the lab's runs. *models.LabRunStore is one.
type LabRunStore interface {
	Start(ctx context.Context, id, scenario, mode string) error
	Finish(ctx context.Context, id string, ok bool, outcome, result string) error
	Get(ctx context.Context, id string) (*models.LabRun, error)
	List(ctx context.Context, limit int) ([]models.LabRun, error)
	Latest(ctx context.Context) (map[string]models.LabRun, error)
}

// LabPages is the failure lab in the browser: the catalogue, a run (one at a time: each run
// starts a whole shop and gateway), and its result — the verdict in money, the invariants,
// the timeline of messages, and the run's own snapshots of the gateway's ledger, its webhook
// deliveries and the reconciliation report. A run goes on in the background: its POST
// answers 303 to the run's page at once, which refreshes itself until the result is there.
// Results are kept in the shop's database (Runs), so their links survive a restart.
type LabPages struct {
	Runner     LabRunner
	Runs       LabRunStore
	GatewayURL string // the fake gateway's page, for the catalogue's introduction
	Logger     *slog.Logger

	running sync.Mutex // held for the length of a run
	mu      sync.Mutex // guards current
	current string     // the run going on, or ""
	done    sync.WaitGroup
}

// labRunTimeout bounds one run; a run normally takes a few seconds.
const labRunTimeout = 2 * time.Minute

// Routes mounts the lab's pages, with the storefront's session and CSRF middleware.
func (h *LabPages) Routes(e *echo.Echo) {
	g := e.Group("/lab", SessionMiddleware(), CSRF())
	g.GET("", h.catalogue).Name = "lab.catalogue"
	g.POST("/:scenario/run", h.run).Name = "lab.run"
	g.GET("/:scenario/compare", h.compare).Name = "lab.compare"
	g.GET("/runs", h.list).Name = "lab.runs"
	g.GET("/runs/:id", h.result).Name = "lab.result" // also :id.json and :id.mmd
	g.GET("/runs/:id/ledger", h.ledger).Name = "lab.ledger"
	g.GET("/runs/:id/deliveries", h.deliveries).Name = "lab.deliveries"
	g.GET("/runs/:id/reconciliation", h.reconciliation).Name = "lab.reconciliation"
}

// Wait waits for the run going on in the background, if any, to be kept.
func (h *LabPages) Wait() { h.done.Wait() }

func labLayout(title string) layout.Page {
	return layout.Page{Title: title, Scripts: []string{"/static/js/lab.js"}}
}

func (h *LabPages) runningID() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.current
}

func runURL(id string) string { return "/lab/runs/" + id }

func (h *LabPages) catalogue(c echo.Context) error {
	latest, err := h.Runs.Latest(c.Request().Context())
	if err != nil {
		return err
	}
	vm := pages.LabCataloguePage{Layout: labLayout("Failure lab"), CSRF: CSRFToken(c), GatewayURL: h.GatewayURL}
	if id := h.runningID(); id != "" {
		vm.Busy, vm.RunningURL = true, runURL(id)
	}
	byFamily := map[string][]pages.LabScenario{}
	for _, s := range h.Runner.Scenarios() {
		card := labScenarioCard(s)
		for _, mode := range []lab.Mode{lab.Unprotected, lab.Protected} {
			if r, ok := latest[s.Name+"/"+string(mode)]; ok {
				sum := labRunSummary(r, s.Title)
				if mode == lab.Unprotected {
					card.LastUnprotected = &sum
				} else {
					card.LastProtected = &sum
				}
			}
		}
		byFamily[s.Family] = append(byFamily[s.Family], card)
	}
	for _, f := range lab.Families {
		if cards := byFamily[f.Name]; len(cards) > 0 {
			vm.Families = append(vm.Families, pages.LabFamily{Name: f.Name, Title: f.Title, Scenarios: cards})
			delete(byFamily, f.Name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byFamily)) { // a scenario of no known family
		vm.Families = append(vm.Families, pages.LabFamily{Name: name, Title: "Other", Scenarios: byFamily[name]})
	}
	return render(c, http.StatusOK, pages.LabCatalogue(vm))
}

func labScenarioCard(s lab.Scenario) pages.LabScenario {
	breaks := s.Breaks
	if breaks == "" {
		breaks = "nothing: this scenario shows the protection's boundary"
	}
	card := pages.LabScenario{Name: s.Name, Title: s.Title, RealLife: s.RealLife, Mechanism: s.Mechanism,
		Switch: string(s.Switch), Breaks: breaks, RunURL: "/lab/" + s.Name + "/run",
		Command: "go run ./cmd/shop lab run " + s.Name, CompareURL: "/lab/" + s.Name + "/compare"}
	for _, l := range s.Links {
		card.Links = append(card.Links, pages.LabLink{Path: l})
	}
	return card
}

func labRunSummary(r models.LabRun, title string) pages.LabRunSummary {
	sum := pages.LabRunSummary{ID: r.ID, URL: runURL(r.ID), Scenario: r.Scenario, Title: title, Mode: r.Mode,
		When: r.CreatedAt.UTC().Format("2006-01-02 15:04:05 UTC"), Running: r.Status == models.LabRunRunning,
		OK: r.OK, Harm: r.Outcome != lab.OutcomeClean && r.Outcome != ""}
	switch {
	case sum.Running:
		sum.Headline = "running…"
	case r.Outcome == "":
		sum.Headline = "the run failed"
	default:
		sum.Headline = strings.ReplaceAll(r.Outcome, "_", " ")
	}
	return sum
}

func (h *LabPages) find(name string) (lab.Scenario, bool) {
	for _, s := range h.Runner.Scenarios() {
		if s.Name == name {
			return s, true
		}
	}
	return lab.Scenario{}, false
}

// run starts a run in the background and answers 303 to its page; while a run is going, it
// answers 409 with the busy page.
func (h *LabPages) run(c echo.Context) error {
	s, ok := h.find(c.Param("scenario"))
	if !ok {
		return models.ErrNotFound.Msgf("no lab scenario %q", c.Param("scenario"))
	}
	mode := lab.Mode(c.FormValue("mode"))
	if mode != lab.Protected && mode != lab.Unprotected {
		return models.ErrInvalid.Msgf("mode must be %q or %q", lab.Protected, lab.Unprotected)
	}
	if !h.running.TryLock() {
		vm := pages.LabBusyPage{Layout: labLayout("A run is in progress"), CatalogueURL: "/lab"}
		if id := h.runningID(); id != "" {
			vm.RunningURL = runURL(id)
		}
		return render(c, http.StatusConflict, pages.LabBusy(vm))
	}
	id := models.NewID("labrun")
	if err := h.Runs.Start(c.Request().Context(), id, s.Name, string(mode)); err != nil {
		h.running.Unlock()
		return err
	}
	h.mu.Lock()
	h.current = id
	h.mu.Unlock()
	h.done.Add(1)
	// The run outlives the request: its page shows it when it is done.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), labRunTimeout)
	go func() {
		defer h.done.Done()
		defer h.running.Unlock()
		defer cancel()
		h.keep(ctx, id, s, mode)
		h.mu.Lock()
		h.current = ""
		h.mu.Unlock()
	}()
	return c.Redirect(http.StatusSeeOther, runURL(id))
}

// keep runs s in mode and keeps the result as run id.
func (h *LabPages) keep(ctx context.Context, id string, s lab.Scenario, mode lab.Mode) {
	res, err := h.Runner.Run(ctx, s.Name, mode)
	if err != nil {
		res = lab.Result{Scenario: s.Name, Mode: mode, Err: err.Error()}
		lab.Judge(s, &res)
	}
	res.ID = id
	b, err := json.Marshal(res)
	if err == nil {
		err = h.Runs.Finish(context.WithoutCancel(ctx), id, res.OK, res.Outcome, string(b))
	}
	if err != nil && h.Logger != nil {
		h.Logger.Error("keep lab run", "run", id, "err", err)
	}
}

func (h *LabPages) list(c echo.Context) error {
	runs, err := h.Runs.List(c.Request().Context(), 100)
	if err != nil {
		return err
	}
	vm := pages.LabRunsPage{Layout: labLayout("Lab runs")}
	for _, r := range runs {
		title := r.Scenario
		if s, ok := h.find(r.Scenario); ok {
			title = s.Title
		}
		vm.Runs = append(vm.Runs, labRunSummary(r, title))
	}
	return render(c, http.StatusOK, pages.LabRuns(vm))
}

// load returns kept run id with its result (nil while it is running).
func (h *LabPages) load(ctx context.Context, id string) (*models.LabRun, *lab.Result, error) {
	run, err := h.Runs.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if run.Status != models.LabRunDone {
		return run, nil, nil
	}
	var res lab.Result
	if err := json.Unmarshal([]byte(run.Result), &res); err != nil {
		return nil, nil, fmt.Errorf("decode lab run %s: %w", id, err)
	}
	return run, &res, nil
}

// result is a run's page, or with .json or .mmd its data or its diagram.
func (h *LabPages) result(c echo.Context) error {
	id, format := c.Param("id"), ""
	for _, ext := range []string{".json", ".mmd"} {
		if base, ok := strings.CutSuffix(id, ext); ok {
			id, format = base, ext
		}
	}
	run, res, err := h.load(c.Request().Context(), id)
	if err != nil {
		return err
	}
	if format != "" && res == nil {
		return models.ErrNotFound.Msgf("lab run %s has no result yet: it is still running", id)
	}
	switch format {
	case ".json":
		return writeJSON(c, http.StatusOK, res)
	case ".mmd":
		return c.Blob(http.StatusOK, "text/plain; charset=utf-8", []byte(lab.Mermaid(*res)))
	}
	vm := h.runPage(c, run, res)
	vm.Present = c.QueryParam("present") == "1"
	return render(c, http.StatusOK, pages.LabRun(vm))
}

// runPage is the view model of a kept run.
func (h *LabPages) runPage(c echo.Context, run *models.LabRun, res *lab.Result) pages.LabRunPage {
	s, ok := h.find(run.Scenario)
	if !ok {
		s = lab.Scenario{Name: run.Scenario, Title: run.Scenario}
	}
	base := runURL(run.ID)
	vm := pages.LabRunPage{Layout: labLayout(s.Title + " · lab run"), CSRF: CSRFToken(c), ID: run.ID,
		Scenario: labScenarioCard(s), Mode: run.Mode, Prompts: lab.AskTheRoom(s),
		LedgerURL: base + "/ledger", DeliveriesURL: base + "/deliveries", ReconciliationURL: base + "/reconciliation",
		JSONURL: base + ".json", MermaidURL: base + ".mmd", PresentURL: base + "?present=1", PageURL: base,
		CatalogueURL: "/lab", RunsURL: "/lab/runs"}
	vm.Busy = h.runningID() != ""
	if run.Mode == string(lab.Protected) {
		vm.ModeLabel = "protection on"
	} else {
		vm.ModeLabel = "protection off: " + string(s.Switch)
	}
	if res == nil {
		vm.Running = h.runningID() == run.ID
		vm.Interrupted = !vm.Running
		return vm
	}
	vm.Off, vm.Database, vm.Err, vm.Unsettled = string(res.Off), res.Database, res.Err, res.Unsettled
	vm.Took = res.Took.Round(time.Millisecond).String()
	vm.Seed = strconv.FormatInt(res.Seed, 10)
	for _, k := range slices.Sorted(maps.Keys(res.Settings)) {
		vm.Settings = append(vm.Settings, pages.LabSetting{Name: k, Value: res.Settings[k]})
	}
	vm.Verdict = labVerdict(*res)
	for _, ch := range res.Checks {
		vm.Checks = append(vm.Checks, pages.LabCheck{Invariant: ch.Invariant, Holds: ch.Holds, Detail: ch.Detail})
	}
	vm.Timeline = LabTimeline(*res, vm.LedgerURL, vm.Prompts)
	return vm
}

// labVerdict says in money what the run did to the customer. Harm is drawn as harm whichever
// mode brought it about; the tag says whether that was the point of the run.
func labVerdict(r lab.Result) pages.LabVerdict {
	v := pages.LabVerdict{Mode: string(r.Mode), Outcome: r.Outcome, Currency: r.Overcharged.Currency,
		Overcharge: r.Overcharged.Amount, Headline: lab.Headline(r, components.Money), Judgement: r.Verdict,
		Harm: r.Harmful() || r.Err != "", OK: r.OK}
	if v.Currency == "" {
		v.Currency = "USD"
	}
	switch {
	case r.Err != "":
		v.Tag = "the run itself failed"
	case v.Harm && r.Mode == lab.Unprotected && r.OK:
		v.Tag = "expected with protection off"
	case v.Harm:
		v.Tag = "a bug: this should not happen"
	case r.Mode == lab.Protected:
		v.Tag = "every protection on"
	default:
		v.Tag = "protection off, and still right: the protection's boundary"
	}
	return v
}

// LabTimeline lays out a run's events: one row each, in time order, with a break where more
// than a second passed. A message is an arrow across the lanes from its sender to its
// receiver; a mark sits on its lane. Presenter mode asks prompts, one before each decisive
// event (the first before the first event).
func LabTimeline(r lab.Result, ledgerURL string, prompts []string) pages.LabTimeline {
	t := pages.LabTimeline{Lanes: lab.Lanes}
	col := map[string]int{}
	for i, l := range lab.Lanes {
		col[l] = i
	}
	ask := slices.Clone(prompts)
	next := func() string {
		if len(ask) == 0 {
			return ""
		}
		p := ask[0]
		ask = ask[1:]
		return p
	}
	var last int64
	for i, ev := range r.Events {
		if i > 0 && ev.AtMS-last > 1000 {
			t.Rows = append(t.Rows, pages.LabTimelineRow{Gap: lab.Gap(ev.AtMS-last) + " later", Message: -1})
		}
		last = ev.AtMS
		row := pages.LabTimelineRow{Index: i, Time: strconv.FormatInt(ev.AtMS, 10) + " ms", Kind: ev.Kind,
			Label: ev.Label, Detail: ev.Detail, Lane: ev.Lane, Message: ev.Message, Mark: ev.Mark,
			Decisive: ev.Decisive, Tone: ev.Tone, ChargeID: ev.ChargeID, Key: ev.Key, Order: ev.Order,
			Start: col[ev.Lane], Span: 1}
		if ev.ChargeID != "" {
			row.ChargeURL = ledgerURL + "#" + ev.ChargeID
		}
		if i == 0 || ev.Decisive {
			row.Prompt = next()
		}
		if ev.Message >= 0 && ev.Message < len(r.Messages) {
			m := r.Messages[ev.Message]
			from, to := col[m.From], col[m.To]
			row.MessageKind, row.From, row.To = m.Kind, m.From, m.To
			row.Start, row.Span, row.Leftward = min(from, to), max(from, to)-min(from, to)+1, to < from
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func (h *LabPages) loadDone(c echo.Context) (*models.LabRun, *lab.Result, lab.Scenario, error) {
	run, res, err := h.load(c.Request().Context(), c.Param("id"))
	if err != nil {
		return nil, nil, lab.Scenario{}, err
	}
	if res == nil {
		return nil, nil, lab.Scenario{}, models.ErrNotFound.Msgf("lab run %s has no result yet", run.ID)
	}
	s, ok := h.find(run.Scenario)
	if !ok {
		s = lab.Scenario{Name: run.Scenario, Title: run.Scenario}
	}
	return run, res, s, nil
}

// ledger is the run's own snapshot of the gateway's ledger, taken when the run ended.
func (h *LabPages) ledger(c echo.Context) error {
	run, res, s, err := h.loadDone(c)
	if err != nil {
		return err
	}
	vm := pages.LabLedgerPage{Layout: labLayout("Ledger · " + s.Title), Title: s.Title + " · " + run.Mode, RunURL: runURL(run.ID)}
	harm := map[string]bool{}
	for _, ev := range res.Events {
		if ev.Kind == "charge" && ev.Tone == "harm" {
			harm[ev.ChargeID] = true
		}
	}
	for _, ch := range res.Ledger {
		vm.Charges = append(vm.Charges, pages.LabChargeRow{ID: ch.ID, Status: ch.Status,
			Amount: components.Money(ch.Amount, ch.Currency), Key: ch.IdempotencyKey,
			Order: ch.Metadata["order_id"], Payment: ch.Metadata["payment_id"], Harm: harm[ch.ID]})
	}
	return render(c, http.StatusOK, pages.LabLedger(vm))
}

// deliveries is the run's own snapshot of the gateway's webhook deliveries.
func (h *LabPages) deliveries(c echo.Context) error {
	run, res, s, err := h.loadDone(c)
	if err != nil {
		return err
	}
	vm := pages.LabDeliveriesPage{Layout: labLayout("Webhook deliveries · " + s.Title), Title: s.Title + " · " + run.Mode, RunURL: runURL(run.ID)}
	for _, d := range res.Deliveries {
		var tries []string
		for _, a := range d.Attempts {
			t := fmt.Sprintf("#%d %d", a.Attempt, a.StatusCode)
			if a.Error != "" {
				t = fmt.Sprintf("#%d %s", a.Attempt, a.Error)
			}
			tries = append(tries, t)
		}
		vm.Deliveries = append(vm.Deliveries, pages.LabDeliveryRow{Event: d.EventID, Type: d.EventType, Charge: d.ChargeID,
			Status: d.Status, Created: d.Created.UTC().Format("15:04:05.000"), Attempts: strings.Join(tries, ", ")})
	}
	return render(c, http.StatusOK, pages.LabDeliveries(vm))
}

// reconciliation is the run's own reconciliation report, taken when the run ended.
func (h *LabPages) reconciliation(c echo.Context) error {
	run, res, s, err := h.loadDone(c)
	if err != nil {
		return err
	}
	vm := pages.LabReconciliationPage{Layout: labLayout("Reconciliation · " + s.Title), Title: s.Title + " · " + run.Mode, RunURL: runURL(run.ID)}
	rep := res.Reconciliation
	if rep == nil {
		vm.Missing = true
		return render(c, http.StatusOK, pages.LabReconciliation(vm))
	}
	vm.Counts = fmt.Sprintf("%d order(s), %d paid, %d succeeded charge(s) at the gateway", rep.Orders, rep.PaidOrders, rep.SucceededCharges)
	line := func(name string, n int, detail string) {
		vm.Lines = append(vm.Lines, pages.LabCheck{Invariant: name, Holds: n == 0, Detail: detail})
	}
	var doubles []string
	for _, d := range rep.DoubleChargedOrders {
		doubles = append(doubles, fmt.Sprintf("order %s: charges %s, %s too much", d.OrderID, strings.Join(d.Charges, ", "), components.Money(d.Amount, res.Overcharged.Currency)))
	}
	line("No double charge", len(rep.DoubleChargedOrders), strings.Join(doubles, "; "))
	line("Every charge has an order", len(rep.ChargesWithoutOrder), strings.Join(rep.ChargesWithoutOrder, ", "))
	line("Every paid order has a charge", len(rep.PaidOrdersWithoutCharge), strings.Join(rep.PaidOrdersWithoutCharge, ", "))
	var dups []string
	for _, d := range rep.DuplicateSideEffects {
		dups = append(dups, fmt.Sprintf("order %s: %d receipts, %d shipments", d.OrderID, d.Receipts, d.Shipments))
	}
	line("No duplicate receipt or shipment", len(rep.DuplicateSideEffects), strings.Join(dups, "; "))
	line("No payment left unresolved", len(rep.UnresolvedPayments), fmt.Sprintf("%d payment(s)", len(rep.UnresolvedPayments)))
	line("No stale operation", len(rep.StaleOperations), fmt.Sprintf("%d key(s)", len(rep.StaleOperations)))
	return render(c, http.StatusOK, pages.LabReconciliation(vm))
}

// compare shows the latest unprotected and protected runs of a scenario side by side.
func (h *LabPages) compare(c echo.Context) error {
	s, ok := h.find(c.Param("scenario"))
	if !ok {
		return models.ErrNotFound.Msgf("no lab scenario %q", c.Param("scenario"))
	}
	latest, err := h.Runs.Latest(c.Request().Context())
	if err != nil {
		return err
	}
	vm := pages.LabComparePage{Layout: labLayout(s.Title + " · both ways"), Scenario: labScenarioCard(s)}
	for _, mode := range []lab.Mode{lab.Unprotected, lab.Protected} {
		r, ok := latest[s.Name+"/"+string(mode)]
		if !ok {
			continue
		}
		run, res, err := h.load(c.Request().Context(), r.ID)
		if err != nil {
			return err
		}
		p := h.runPage(c, run, res)
		if mode == lab.Unprotected {
			vm.Unprotected = &p
		} else {
			vm.Protected = &p
		}
	}
	return render(c, http.StatusOK, pages.LabCompare(vm))
}
