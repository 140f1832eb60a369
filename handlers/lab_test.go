package handlers_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"checkoutlab/handlers"
	"checkoutlab/models"
	"checkoutlab/payments"
	"checkoutlab/payments/lab"
)

// fakeLabRunner answers every run with a fixed result of three checks and four events.
type fakeLabRunner struct {
	mu    sync.Mutex
	calls []string
	hold  chan struct{} // when set, a run waits for it
}

var fakeScenarios = []lab.Scenario{
	{Name: "lost_response", Title: "Lost response after the charge", RealLife: "The connection drops.",
		Mechanism: "A derived gateway key.", Switch: payments.SwitchDerivedGatewayKey, Breaks: lab.ChargesPerOrder,
		Links: []string{"payments/operations.go", "docs/failure-modes.md"}},
	{Name: "new_purchase", Title: "A new purchase of the same items", RealLife: "The customer buys again.",
		Mechanism: "A new key.", Switch: payments.SwitchServerIdempotency},
}

func (f *fakeLabRunner) Scenarios() []lab.Scenario { return fakeScenarios }

func (f *fakeLabRunner) Run(ctx context.Context, name string, mode lab.Mode) (lab.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, name+"/"+string(mode))
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	t0 := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	r := lab.Result{Scenario: name, Mode: mode, Database: "sqlite",
		Checks: []lab.Check{
			{Invariant: lab.ChargesPerOrder, Holds: mode == lab.Protected, Detail: "max 2 succeeded charges for one order (want ≤ 1)"},
			{Invariant: lab.OrdersPerKey, Holds: true, Detail: "1 order per key"},
			{Invariant: lab.PaidOrders, Holds: true, Detail: "1 paid order"},
		},
		Timeline: []lab.Row{
			{At: t0, Actor: "client", Kind: "client.attempt", Key: "k1", Detail: "POST /api/v1/checkout"},
			{At: t0.Add(3 * time.Millisecond), Actor: "database", Kind: "key.reserved", Key: "k1"},
			{At: t0.Add(40 * time.Millisecond), Actor: "gateway", Kind: "gateway.charge", Order: "ord_1", Detail: "lost"},
			{At: t0.Add(900 * time.Millisecond), Actor: "webhook", Kind: "webhook.applied", Order: "ord_1", Detail: "charge.succeeded"},
		},
		Took: 2 * time.Second}
	if mode == lab.Unprotected {
		r.Off = payments.SwitchDerivedGatewayKey
		r.Unsettled = "after 10s: a webhook delivery is pending"
	}
	for _, s := range fakeScenarios {
		if s.Name == name {
			lab.Judge(s, &r)
		}
	}
	return r, nil
}

func mustLabServer(tb testing.TB, runner handlers.LabRunner) *httptest.Server {
	tb.Helper()
	e := handlers.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	(&handlers.LabPages{Runner: runner, GatewayURL: "http://gateway.test"}).Routes(e)
	srv := httptest.NewServer(e)
	tb.Cleanup(srv.Close)
	return srv
}

func TestLabCatalogue(t *testing.T) {
	srv := mustLabServer(t, &fakeLabRunner{})
	b := MustBrowser(t, srv)
	doc := b.MustGet(t, "/lab", http.StatusOK)
	cards := doc.Find(`[data-testid="lab-scenario"]`)
	if cards.Length() != len(fakeScenarios) {
		t.Fatalf("got %d scenarios, want %d", cards.Length(), len(fakeScenarios))
	}
	for i, s := range fakeScenarios {
		card := cards.Eq(i)
		if !strings.Contains(card.Text(), s.Title) || !strings.Contains(card.Text(), s.RealLife) ||
			!strings.Contains(card.Text(), s.Mechanism) || !strings.Contains(card.Text(), string(s.Switch)) {
			t.Errorf("scenario %s: card misses its title, story, mechanism or switch: %q", s.Name, card.Text())
		}
		for _, l := range s.Links {
			if !strings.Contains(card.Text(), l) {
				t.Errorf("scenario %s: card misses link %s", s.Name, l)
			}
		}
		for _, mode := range []string{"unprotected", "protected"} {
			form := card.Find(`form[data-mode="` + mode + `"]`)
			if form.Length() != 1 || form.AttrOr("action", "") != "/lab/"+s.Name+"/run" || form.AttrOr("method", "") != "post" {
				t.Errorf("scenario %s: want one %s form posting to /lab/%s/run", s.Name, mode, s.Name)
			}
			if form.Find(`input[name=_csrf]`).AttrOr("value", "") == "" || form.Find(`input[name=mode]`).AttrOr("value", "") != mode {
				t.Errorf("scenario %s: %s form lacks its _csrf or mode", s.Name, mode)
			}
		}
	}
	if doc.Find(`a[href="/reconciliation"]`).Length() == 0 || doc.Find(`a[href="http://gateway.test"]`).Length() == 0 {
		t.Error("want links to the reconciliation view and the gateway")
	}
}

func TestLabRun(t *testing.T) {
	srv := mustLabServer(t, &fakeLabRunner{})
	b := MustBrowser(t, srv)
	b.MustGet(t, "/lab", http.StatusOK)
	for _, tc := range []struct{ mode, verdict string }{
		{"unprotected", "reproduced: without derived_gateway_key, charges_per_order breaks"},
		{"protected", "prevented"},
	} {
		resp, _ := b.MustPost(t, "/lab/lost_response/run", url.Values{"mode": {tc.mode}}, http.StatusSeeOther)
		loc := MustLocation(t, resp)
		if !strings.HasPrefix(loc, "/lab/runs/") {
			t.Fatalf("got redirect to %q, want /lab/runs/…", loc)
		}
		doc := b.MustGet(t, loc, http.StatusOK)
		verdict := doc.Find(`[data-testid="lab-verdict"]`)
		if !strings.Contains(verdict.Text(), tc.verdict) || verdict.AttrOr("data-ok", "") != "true" {
			t.Errorf("%s: got verdict %q (ok=%s), want %q, ok", tc.mode, verdict.Text(), verdict.AttrOr("data-ok", ""), tc.verdict)
		}
		checks := doc.Find(`[data-testid="lab-check"]`)
		if checks.Length() != 3 {
			t.Errorf("%s: got %d invariant rows, want 3", tc.mode, checks.Length())
		}
		wantHolds := map[string]string{"unprotected": "false", "protected": "true"}[tc.mode]
		if got := checks.First().AttrOr("data-holds", ""); got != wantHolds || !strings.Contains(checks.First().Text(), "max 2") {
			t.Errorf("%s: first check holds=%s %q, want holds=%s with its detail", tc.mode, got, checks.First().Text(), wantHolds)
		}
		svg := doc.Find(`svg[data-testid="lab-timeline"]`)
		if svg.Length() != 1 {
			t.Fatalf("%s: want one SVG timeline", tc.mode)
		}
		if n := svg.Find(`[data-testid="lab-timeline-event"]`).Length(); n != 4 {
			t.Errorf("%s: got %d events in the SVG, want 4", tc.mode, n)
		}
		if n := svg.Find(`[data-testid="lab-lane"]`).Length(); n != len(handlers.LabLanes) {
			t.Errorf("%s: got %d lanes, want %d", tc.mode, n, len(handlers.LabLanes))
		}
		if !strings.Contains(svg.Text(), "900 ms") || !strings.Contains(svg.Text(), "webhook.applied") {
			t.Errorf("%s: the SVG lacks an event's time or kind: %q", tc.mode, svg.Text())
		}
		if n := doc.Find(`[data-testid="lab-timeline-row"]`).Length(); n != 4 {
			t.Errorf("%s: got %d table rows, want 4", tc.mode, n)
		}
		unsettled := doc.Find(`[data-testid="lab-unsettled"]`)
		if want := tc.mode == "unprotected"; want != (unsettled.Length() == 1) || want && !strings.Contains(unsettled.Text(), "a webhook delivery is pending") {
			t.Errorf("%s: got unsettled note %q, want one only when the run did not settle", tc.mode, unsettled.Text())
		}
		if doc.Find(`a[href="/reconciliation"]`).Length() == 0 || doc.Find(`a[href="http://gateway.test"]`).Length() == 0 {
			t.Errorf("%s: want links to the reconciliation view and the gateway", tc.mode)
		}
	}
}

func TestLabRunRefusals(t *testing.T) {
	runner := &fakeLabRunner{}
	srv := mustLabServer(t, runner)
	b := MustBrowser(t, srv)
	b.MustGet(t, "/lab", http.StatusOK)
	b.MustPost(t, "/lab/no_such_scenario/run", url.Values{"mode": {"protected"}}, http.StatusNotFound)
	b.MustPost(t, "/lab/lost_response/run", url.Values{"mode": {"sideways"}}, http.StatusBadRequest)
	b.MustGet(t, "/lab/runs/labrun_unknown", http.StatusNotFound)
	resp, _ := b.MustPost(t, "/lab/lost_response/run", url.Values{"mode": {"protected"}, "_csrf": {""}}, http.StatusBadRequest)
	_ = resp
	fresh := MustBrowser(t, srv) // no CSRF cookie at all
	fresh.MustPost(t, "/lab/lost_response/run", url.Values{"mode": {"protected"}, "_csrf": {"forged"}}, http.StatusBadRequest)
	if len(runner.calls) != 0 {
		t.Errorf("got runs %v, want none", runner.calls)
	}
}

func TestLabRunOneAtATime(t *testing.T) {
	runner := &fakeLabRunner{hold: make(chan struct{})}
	srv := mustLabServer(t, runner)
	first, second := MustBrowser(t, srv), MustBrowser(t, srv)
	first.MustGet(t, "/lab", http.StatusOK)
	second.MustGet(t, "/lab", http.StatusOK)
	status := make(chan int, 1)
	go func() { // no t.Fatal off the test's goroutine: the status goes back on a channel
		form := url.Values{"mode": {"protected"}, "_csrf": {first.csrf}}
		resp, err := first.client.PostForm(srv.URL+"/lab/lost_response/run", form)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	for {
		runner.mu.Lock()
		n := len(runner.calls)
		runner.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, doc := second.MustPost(t, "/lab/lost_response/run", url.Values{"mode": {"protected"}}, http.StatusConflict)
	if doc.Find(`[data-testid="lab-busy"]`).Length() != 1 {
		t.Error("want the run-in-progress page")
	}
	close(runner.hold)
	if got := <-status; got != http.StatusSeeOther {
		t.Errorf("the first run: got %d, want 303", got)
	}
}

// TestLabTimelineArrows: a message between lanes gets an arrow; a crash (done to the shop, not
// sent to it) gets none, and the event after it starts afresh.
func TestLabTimelineArrows(t *testing.T) {
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	rows := []lab.Row{
		{At: at, Actor: models.ActorClient, Kind: "attempt", Detail: "sent attempt 1"},
		{At: at.Add(time.Millisecond), Actor: models.ActorShop, Kind: models.JournalReservation, Detail: "reserved"},
		{At: at.Add(2 * time.Millisecond), Actor: models.ActorShop, Kind: models.JournalCrash, Detail: "killed"},
		{At: at.Add(3 * time.Millisecond), Actor: models.ActorClient, Kind: "attempt", Detail: "no answer"},
		{At: at.Add(4 * time.Millisecond), Actor: models.ActorShop, Kind: models.JournalReservation, Detail: "in_progress"},
	}
	d, table := handlers.LabTimeline(rows)
	var got []bool
	for _, ev := range d.Events {
		got = append(got, ev.Arrow)
	}
	if want := []bool{false, true, false, false, true}; !slices.Equal(got, want) {
		t.Errorf("got arrows %v, want %v", got, want)
	}
	if len(table) != len(rows) || table[2].Time != "2 ms" {
		t.Errorf("got table %+v, want %d rows timed from the first event", table, len(rows))
	}
}
