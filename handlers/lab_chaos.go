package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
	"checkoutlab/payments"
	"checkoutlab/payments/lab"
	"checkoutlab/web/components"
	"checkoutlab/web/layout"
	"checkoutlab/web/pages"
)

// ChaosRunner makes one chaos run on a fresh stack and judges it, reporting its progress as
// it goes. cmd/shop's chaos runner is one.
type ChaosRunner interface {
	RunChaos(ctx context.Context, o lab.ChaosOptions, report func(lab.ChaosProgress)) (*lab.ChaosResult, error)
}

// ChaosRunStore keeps chaos runs. *models.ChaosRunStore is one.
type ChaosRunStore interface {
	Start(ctx context.Context, r *models.ChaosRun) error
	Finish(ctx context.Context, id, status string, ok bool, verdict, result, why string) error
	Get(ctx context.Context, id string) (*models.ChaosRun, error)
	Recent(ctx context.Context, limit int) ([]models.ChaosRun, error)
}

// ChaosPages is the failure lab's chaos mode in the browser: a form, a run going on in the
// background with its progress polled by htmx, and the judged result, kept in the database.
// One run at a time: each starts its own replicas, gateway and database.
type ChaosPages struct {
	Runner ChaosRunner
	Store  ChaosRunStore

	running  sync.Mutex // held for the length of a run
	mu       sync.Mutex // guards progress and current
	current  string     // the run going on, "" for none
	progress map[string]lab.ChaosProgress
}

// The browser's bounds: a run from the page stays a few minutes at most.
const (
	chaosMaxPurchases = 2000
	chaosMaxReplicas  = 5
	chaosRunTimeout   = 20 * time.Minute
)

// Routes mounts /lab/chaos, POST /lab/chaos, /lab/chaos/runs/:id (with .json),
// /lab/chaos/runs/:id/progress and /lab/chaos/runs/:id/orders/:order, with the storefront's
// session and CSRF middleware.
func (h *ChaosPages) Routes(e *echo.Echo) {
	g := e.Group("/lab/chaos", SessionMiddleware(), CSRF())
	g.GET("", h.form).Name = "lab.chaos"
	g.POST("", h.start).Name = "lab.chaos.start"
	g.GET("/runs/:id", h.run).Name = "lab.chaos.run"
	g.GET("/runs/:id/progress", h.progressPartial).Name = "lab.chaos.progress"
	g.GET("/runs/:id/orders/:order", h.timeline).Name = "lab.chaos.timeline"
}

func (h *ChaosPages) form(c echo.Context) error {
	vm := pages.ChaosFormPage{Layout: layout.Page{Title: "Chaos mode"}, CSRF: CSRFToken(c), Seed: 1,
		Purchases: lab.ChaosDefaultPurchases, Replicas: lab.ChaosDefaultReplicas, Busy: h.busy() != ""}
	for _, s := range payments.Switches {
		vm.Switches = append(vm.Switches, string(s))
	}
	runs, err := h.Store.Recent(c.Request().Context(), 20)
	if err != nil {
		return err
	}
	for _, r := range runs {
		vm.Runs = append(vm.Runs, pages.ChaosRunLink{URL: "/lab/chaos/runs/" + r.ID, Label: chaosLabel(r),
			Status: h.status(r), Verdict: r.Verdict, OK: r.OK})
	}
	return render(c, http.StatusOK, pages.ChaosForm(vm))
}

func (h *ChaosPages) busy() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.current
}

// status is a run's status, with a run still marked running that this shop is not making
// (a restart cut it off) said as such.
func (h *ChaosPages) status(r models.ChaosRun) string {
	if r.Status == models.ChaosRunning && h.busy() != r.ID {
		return "cut off by a restart of the shop"
	}
	return r.Status
}

func chaosLabel(r models.ChaosRun) string {
	off := "every protection on"
	if r.ProtectionOff != "" {
		off = r.ProtectionOff + " off"
	}
	return fmt.Sprintf("seed %d · %d purchases · %d replicas · %s", r.Seed, r.Purchases, r.Replicas, off)
}

func (h *ChaosPages) start(c echo.Context) error {
	o := lab.ChaosOptions{Clients: lab.ChaosDefaultClients, Off: payments.Switch(c.FormValue("off"))}
	var bad []string
	var err error
	if o.Seed, err = strconv.ParseInt(c.FormValue("seed"), 10, 64); err != nil || o.Seed < 0 {
		bad = append(bad, "seed")
	}
	if o.Purchases, err = strconv.Atoi(c.FormValue("purchases")); err != nil || o.Purchases < 1 || o.Purchases > chaosMaxPurchases {
		bad = append(bad, "purchases")
	}
	if o.Replicas, err = strconv.Atoi(c.FormValue("replicas")); err != nil || o.Replicas < 1 || o.Replicas > chaosMaxReplicas {
		bad = append(bad, "replicas")
	}
	if o.Check() != nil {
		bad = append(bad, "off")
	}
	if len(bad) > 0 {
		return models.Errorf(models.KindInvalid, models.ErrInvalid.Code, "check %s: a seed of 0 or more, 1 to %d purchases, 1 to %d replicas, and a known switch",
			strings.Join(bad, ", "), chaosMaxPurchases, chaosMaxReplicas)
	}
	if !h.running.TryLock() {
		vm := pages.ChaosBusyPage{Layout: layout.Page{Title: "A chaos run is in progress"}, RunURL: "/lab/chaos/runs/" + h.busy(), FormURL: "/lab/chaos"}
		return render(c, http.StatusConflict, pages.ChaosBusy(vm))
	}
	run := &models.ChaosRun{ID: models.NewID("chaos"), Seed: o.Seed, Purchases: o.Purchases, Clients: o.Clients,
		Replicas: o.Replicas, ProtectionOff: string(o.Off)}
	if err := h.Store.Start(c.Request().Context(), run); err != nil {
		h.running.Unlock()
		return err
	}
	h.mu.Lock()
	if h.progress == nil {
		h.progress = map[string]lab.ChaosProgress{}
	}
	h.current = run.ID
	h.progress[run.ID] = lab.ChaosProgress{Phase: "starting", Total: o.Purchases}
	h.mu.Unlock()
	// The run goes on after this request has been answered: the browser watches its progress.
	go h.make(run.ID, o)
	return c.Redirect(http.StatusSeeOther, "/lab/chaos/runs/"+run.ID)
}

// make makes run id and keeps its result.
func (h *ChaosPages) make(id string, o lab.ChaosOptions) {
	defer h.running.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), chaosRunTimeout)
	defer cancel()
	res, err := h.Runner.RunChaos(ctx, o, func(p lab.ChaosProgress) {
		h.mu.Lock()
		h.progress[id] = p
		h.mu.Unlock()
	})
	status, ok, verdict, result, why := models.ChaosFailed, false, "", "", ""
	if err != nil {
		why = err.Error()
	} else if b, err := json.Marshal(res); err != nil {
		why = err.Error()
	} else {
		status, ok, verdict, result = models.ChaosDone, res.OK, res.Verdict, string(b)
	}
	if err := h.Store.Finish(context.Background(), id, status, ok, verdict, result, why); err != nil {
		why = err.Error()
	}
	h.mu.Lock()
	h.current = ""
	delete(h.progress, id)
	h.mu.Unlock()
}

// load returns run id with its result, if it has one.
func (h *ChaosPages) load(c echo.Context, id string) (*models.ChaosRun, *lab.ChaosResult, error) {
	r, err := h.Store.Get(c.Request().Context(), id)
	if err != nil {
		return nil, nil, err
	}
	if r.Status != models.ChaosDone {
		return r, nil, nil
	}
	var res lab.ChaosResult
	if err := json.Unmarshal([]byte(r.Result), &res); err != nil {
		return nil, nil, fmt.Errorf("read chaos run %s: %w", id, err)
	}
	return r, &res, nil
}

func (h *ChaosPages) run(c echo.Context) error {
	id, asJSON := strings.CutSuffix(c.Param("id"), ".json")
	r, res, err := h.load(c, id)
	if err != nil {
		return err
	}
	if asJSON {
		if res == nil {
			return models.Errorf(models.KindNotFound, models.ErrNotFound.Code, "chaos run %s is %s: it has no result yet", id, h.status(*r))
		}
		return c.JSONBlob(http.StatusOK, []byte(r.Result))
	}
	vm := pages.ChaosRunPage{Layout: layout.Page{Title: "Chaos run"}, Label: chaosLabel(*r), Status: h.status(*r),
		Error: r.Error, FormURL: "/lab/chaos", JSONURL: "/lab/chaos/runs/" + id + ".json"}
	if r.Status == models.ChaosRunning {
		vm.Progress = h.progressView(id)
		if vm.Status != models.ChaosRunning {
			vm.Status, vm.Error = models.ChaosFailed, vm.Status
		}
	}
	if res != nil {
		chaosResultView(&vm, id, res)
	}
	return render(c, http.StatusOK, pages.ChaosRun(vm))
}

func (h *ChaosPages) progressView(id string) pages.ChaosProgressView {
	h.mu.Lock()
	p := h.progress[id]
	h.mu.Unlock()
	v := pages.ChaosProgressView{ProgressURL: "/lab/chaos/runs/" + id + "/progress", Phase: p.Phase, Done: p.Done,
		Total: p.Total, Answered: p.Answered, GaveUp: p.GaveUp, Faults: p.Faults, Kills: p.Kills}
	if p.Total > 0 {
		v.Percent = 100 * p.Done / p.Total
	}
	return v
}

// progressPartial is the htmx poll of a running run. Once the run has ended it asks htmx to
// reload the page, which shows the result.
func (h *ChaosPages) progressPartial(c echo.Context) error {
	id := c.Param("id")
	if h.busy() != id {
		c.Response().Header().Set("HX-Refresh", "true")
		return c.NoContent(http.StatusOK)
	}
	return render(c, http.StatusOK, pages.ChaosProgress(h.progressView(id)))
}

// Chart geometry, in SVG user units.
const (
	chaosChartW = 720
	chaosChartH = 240
)

// chaosResultView fills vm from a judged run.
func chaosResultView(vm *pages.ChaosRunPage, id string, res *lab.ChaosResult) {
	vm.OK, vm.Verdict, vm.Database, vm.Unsettled = res.OK, res.Verdict, res.Database, res.Unsettled
	vm.Took = res.Took.Round(100 * time.Millisecond).String()
	vm.Purchases, vm.Answered, vm.GaveUp, vm.Declined = res.Purchases, res.Answered, res.GaveUp, res.Declined
	vm.DoubleCharges, vm.DuplicateOrders, vm.Lost = res.DoubleCharges, res.DuplicateOrders, res.Lost
	vm.DuplicateReceipts, vm.StatusRegressed, vm.Suspected = res.DuplicateReceipts, res.StatusRegressed, res.SuspectedDuplicates
	vm.Kills, vm.Faults, vm.Problems = res.Kills, res.Faults, res.Problems
	vm.Harm = res.DoubleCharges+res.DuplicateOrders+res.Lost+res.DuplicateReceipts+res.StatusRegressed > 0 || !res.OK
	vm.Overcharge = "nothing"
	var money []string
	for _, m := range res.Overcharged {
		money = append(money, components.Money(m.Amount, m.Currency))
		vm.OverchargeMinor += m.Amount
	}
	if len(money) > 0 {
		vm.Overcharge = strings.Join(money, " + ")
	}
	for _, ch := range res.Invariants {
		vm.Checks = append(vm.Checks, pages.ChaosCheck{Invariant: ch.Invariant, Holds: ch.Holds, Detail: ch.Detail})
	}
	for _, w := range res.Worst {
		vm.Worst = append(vm.Worst, pages.ChaosWorstLink{Purchase: w.Purchase, OrderID: w.OrderID, Why: w.Why,
			URL: "/lab/chaos/runs/" + id + "/orders/" + w.OrderID})
	}
	vm.Chart = chaosChart(res)
}

// chaosChart lays out the purchases over time: x is the time since the run began, y how many
// purchases had finished.
func chaosChart(res *lab.ChaosResult) pages.ChaosChart {
	c := pages.ChaosChart{Width: chaosChartW, Height: chaosChartH}
	end := int64(1)
	for _, p := range res.Points {
		end = max(end, p.AtMS)
	}
	for _, m := range res.Marks {
		end = max(end, m.AtMS)
	}
	total := max(len(res.Points), 1)
	x := func(ms int64) int { return int(ms * chaosChartW / end) }
	y := func(n int) int { return chaosChartH - n*(chaosChartH-20)/total }
	points := []string{fmt.Sprintf("0,%d", chaosChartH)}
	for i, p := range res.Points {
		points = append(points, fmt.Sprintf("%d,%d", x(p.AtMS), y(i+1)))
		if p.Outcome == lab.ChaosOutcomeGaveUp || p.Outcome == lab.ChaosOutcomeDeclined {
			c.Dots = append(c.Dots, pages.ChaosDot{X: x(p.AtMS), Y: y(i + 1), Outcome: p.Outcome})
		}
	}
	c.Line = strings.Join(points, " ")
	for _, m := range res.Marks {
		label := m.Label
		if m.Replica > 0 {
			label = fmt.Sprintf("replica %d: %s", m.Replica, m.Label)
		}
		c.Marks = append(c.Marks, pages.ChaosChartMark{X: x(m.AtMS), Kind: m.Kind, Label: label})
	}
	c.TotalLabel = fmt.Sprintf("%d purchases", len(res.Points))
	c.TimeLabel = (time.Duration(end) * time.Millisecond).Round(100 * time.Millisecond).String()
	return c
}

func (h *ChaosPages) timeline(c echo.Context) error {
	id := c.Param("id")
	_, res, err := h.load(c, id)
	if err != nil {
		return err
	}
	if res != nil {
		for _, w := range res.Worst {
			if w.OrderID != c.Param("order") {
				continue
			}
			vm := pages.ChaosTimelinePage{Layout: layout.Page{Title: "Order " + w.OrderID + " · chaos run"},
				OrderID: w.OrderID, Why: w.Why, RunURL: "/lab/chaos/runs/" + id}
			var first time.Time
			for i, r := range w.Timeline {
				if i == 0 {
					first = r.At
				}
				vm.Rows = append(vm.Rows, pages.ChaosRow{Time: strconv.FormatInt(r.At.Sub(first).Milliseconds(), 10),
					Actor: r.Actor, Kind: r.Kind, Detail: r.Detail})
			}
			return render(c, http.StatusOK, pages.ChaosTimeline(vm))
		}
	}
	return models.Errorf(models.KindNotFound, models.ErrNotFound.Code, "chaos run %s keeps no timeline of order %s", id, c.Param("order"))
}
