package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
	"checkoutlab/payments/lab"
	"checkoutlab/web/layout"
	"checkoutlab/web/pages"
)

// LabRunner lists the failure lab's scenarios and runs one on a fresh stack. cmd/shop's
// adapter around its lab runner is one.
type LabRunner interface {
	Scenarios() []lab.Scenario
	Run(ctx context.Context, name string, mode lab.Mode) (lab.Result, error)
}

// LabPages is the failure lab in the browser: the catalogue, a run (one at a time: each run
// starts a whole shop and gateway), and its result as verdict, invariants and a sequence
// diagram. Results are kept in memory, the last maxLabRuns of them.
type LabPages struct {
	Runner     LabRunner
	GatewayURL string // the fake gateway's fault panel, one click from a result

	running sync.Mutex // held for the length of a run
	mu      sync.Mutex // guards runs and order
	runs    map[string]lab.Result
	order   []string
}

// maxLabRuns bounds the results kept in memory.
const maxLabRuns = 50

// labRunTimeout bounds one run; a run normally takes a few seconds.
const labRunTimeout = 2 * time.Minute

// LabLanes are the journal's actors, left to right as the diagram draws them.
var LabLanes = []string{"client", "shop", "database", "gateway", "webhook", "outbox", "completer"}

// Routes mounts /lab, POST /lab/:scenario/run and /lab/runs/:id, with the storefront's
// session and CSRF middleware.
func (h *LabPages) Routes(e *echo.Echo) {
	g := e.Group("/lab", SessionMiddleware(), CSRF())
	g.GET("", h.catalogue).Name = "lab.catalogue"
	g.POST("/:scenario/run", h.run).Name = "lab.run"
	g.GET("/runs/:id", h.result).Name = "lab.result"
}

func (h *LabPages) layout(title string) layout.Page {
	return layout.Page{Title: title}
}

func (h *LabPages) catalogue(c echo.Context) error {
	vm := pages.LabCataloguePage{Layout: h.layout("Failure lab"), CSRF: CSRFToken(c), GatewayURL: h.GatewayURL}
	for _, s := range h.Runner.Scenarios() {
		vm.Scenarios = append(vm.Scenarios, labScenarioCard(s))
	}
	return render(c, http.StatusOK, pages.LabCatalogue(vm))
}

func labScenarioCard(s lab.Scenario) pages.LabScenario {
	breaks := s.Breaks
	if breaks == "" {
		breaks = "nothing: this scenario shows the protection's boundary"
	}
	return pages.LabScenario{Name: s.Name, Title: s.Title, RealLife: s.RealLife, Mechanism: s.Mechanism,
		Switch: string(s.Switch), Breaks: breaks, Links: s.Links, RunURL: "/lab/" + s.Name + "/run"}
}

func (h *LabPages) find(name string) (lab.Scenario, bool) {
	for _, s := range h.Runner.Scenarios() {
		if s.Name == name {
			return s, true
		}
	}
	return lab.Scenario{}, false
}

func (h *LabPages) run(c echo.Context) error {
	s, ok := h.find(c.Param("scenario"))
	if !ok {
		return models.Errorf(models.KindNotFound, models.ErrNotFound.Code, "no lab scenario %q", c.Param("scenario"))
	}
	mode := lab.Mode(c.FormValue("mode"))
	if mode != lab.Protected && mode != lab.Unprotected {
		return models.Errorf(models.KindInvalid, models.ErrInvalid.Code, "mode must be %q or %q", lab.Protected, lab.Unprotected)
	}
	if !h.running.TryLock() {
		vm := pages.LabBusyPage{Layout: h.layout("A run is in progress"), CatalogueURL: "/lab"}
		return render(c, http.StatusConflict, pages.LabBusy(vm))
	}
	// The run finishes even if the browser gives up waiting: its result is kept for later.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), labRunTimeout)
	res, err := h.Runner.Run(ctx, s.Name, mode)
	cancel()
	h.running.Unlock()
	if err != nil {
		return err
	}
	id := models.NewID("labrun")
	h.mu.Lock()
	if h.runs == nil {
		h.runs = map[string]lab.Result{}
	}
	h.runs[id] = res
	h.order = append(h.order, id)
	for len(h.order) > maxLabRuns {
		delete(h.runs, h.order[0])
		h.order = h.order[1:]
	}
	h.mu.Unlock()
	return c.Redirect(http.StatusSeeOther, "/lab/runs/"+id)
}

func (h *LabPages) result(c echo.Context) error {
	h.mu.Lock()
	res, ok := h.runs[c.Param("id")]
	h.mu.Unlock()
	if !ok {
		return models.Errorf(models.KindNotFound, models.ErrNotFound.Code, "no lab run %q (results are kept in memory until the shop restarts)", c.Param("id"))
	}
	s, _ := h.find(res.Scenario)
	if s.Name == "" {
		s = lab.Scenario{Name: res.Scenario, Title: res.Scenario}
	}
	vm := pages.LabRunPage{Layout: h.layout(s.Title + " · lab run"), CSRF: CSRFToken(c),
		Scenario: labScenarioCard(s), Mode: string(res.Mode), Off: string(res.Off), Database: res.Database,
		Verdict: res.Verdict, OK: res.OK, Err: res.Err, Unsettled: res.Unsettled, Took: res.Took.Round(time.Millisecond).String(),
		GatewayURL: h.GatewayURL, ReconciliationURL: "/reconciliation", CatalogueURL: "/lab"}
	if res.Mode == lab.Protected {
		vm.ModeLabel = "protection on"
	} else {
		vm.ModeLabel = "protection off: " + string(res.Off)
	}
	for _, ch := range res.Checks {
		vm.Checks = append(vm.Checks, pages.LabCheck{Invariant: ch.Invariant, Holds: ch.Holds, Detail: ch.Detail})
	}
	vm.Diagram, vm.Rows = LabTimeline(res.Timeline)
	return render(c, http.StatusOK, pages.LabRun(vm))
}

// Diagram geometry, in SVG user units: sized to stay legible when projected.
const (
	labTimeW   = 90  // the time column
	labLaneW   = 110 // one actor's lane
	labTextW   = 520 // the kind and detail column, right of the lanes
	labHeadH   = 48  // the lane labels
	labRowH    = 30  // one journal event
	labDetailN = 50  // characters of detail shown in the diagram (the table has all)
)

// LabTimeline turns a run's journal into the sequence diagram's view model and the rows of
// the table beside it. Times are milliseconds since the first event; an event in another lane
// than the one before it gets an arrow from there, unless one of them is something done to
// the shop (a crash, a reaper run) rather than a message.
func LabTimeline(rows []lab.Row) (pages.LabDiagram, []pages.LabRow) {
	lanes := append([]string(nil), LabLanes...)
	laneOf := map[string]int{}
	for i, l := range lanes {
		laneOf[l] = i
	}
	for _, r := range rows {
		if _, ok := laneOf[r.Actor]; !ok {
			laneOf[r.Actor] = len(lanes)
			lanes = append(lanes, r.Actor)
		}
	}
	centre := func(i int) int { return labTimeW + i*labLaneW + labLaneW/2 }
	d := pages.LabDiagram{
		Width:  labTimeW + len(lanes)*labLaneW + labTextW,
		Height: labHeadH + len(rows)*labRowH + labRowH/2,
		TextX:  labTimeW + len(lanes)*labLaneW + 12,
	}
	for i, l := range lanes {
		d.Lanes = append(d.Lanes, pages.LabLane{Name: l, X: centre(i)})
	}
	var first time.Time
	var table []pages.LabRow
	prev := -1
	for i, r := range rows {
		if i == 0 {
			first = r.At
		}
		ms := strconv.FormatInt(r.At.Sub(first).Milliseconds(), 10) + " ms"
		lane := laneOf[r.Actor]
		ev := pages.LabEvent{Y: labHeadH + i*labRowH + labRowH/2, X: centre(lane), Lane: lane,
			Actor: r.Actor, Time: ms, Kind: r.Kind, Detail: shorten(r.Detail, labDetailN), Title: r.Kind + ": " + r.Detail}
		message := r.Kind != models.JournalCrash && r.Kind != models.JournalReaper
		if !message {
			prev = -1
		}
		if prev >= 0 && prev != lane {
			ev.Arrow, ev.FromX, ev.ToX = true, centre(prev), ev.X-9 // the head stops at the dot
			if ev.FromX > ev.X {
				ev.ToX = ev.X + 9
			}
		}
		if message {
			prev = lane
		}
		d.Events = append(d.Events, ev)
		table = append(table, pages.LabRow{Time: ms, Actor: r.Actor, Kind: r.Kind, Key: r.Key, Order: r.Order, Detail: r.Detail})
	}
	return d, table
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return fmt.Sprintf("%s…", string(r[:n-1]))
}
