package handlers_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"checkoutlab/handlers"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
	"checkoutlab/payments/lab"
)

// fakeLabRunner answers every run with a fixed result: three checks, and a timeline of a
// request, its lost answer, a second charge and the response to the retry.
type fakeLabRunner struct {
	mu    sync.Mutex
	calls []string
	hold  chan struct{} // when set, a run waits for it
}

var fakeScenarios = []lab.Scenario{
	{Name: "lost_response", Title: "Lost response after the charge", Family: lab.FamilyClient, RealLife: "The connection drops.",
		Mechanism: "A derived gateway key.", Switch: payments.SwitchDerivedGatewayKey, Breaks: lab.ChargesPerOrder, PaidOrders: 1,
		Links: []string{"payments/operations.go", "docs/failure-modes.md"}},
	{Name: "new_purchase", Title: "A new purchase of the same items", Family: lab.FamilyBoundaries, RealLife: "The customer buys again.",
		Mechanism: "A new key.", Switch: payments.SwitchServerIdempotency, PaidOrders: 2},
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
	charge := func(id string) lab.Charge {
		return lab.Charge{ID: id, Status: "succeeded", Amount: 3900, Currency: "USD", Metadata: map[string]string{"order_id": "ord_1"}}
	}
	r := lab.Result{Scenario: name, Mode: mode, Database: "sqlite", Seed: 42, Settings: map[string]string{"GATEWAY_TIMEOUT": "1s"},
		Checks: []lab.Check{
			{Invariant: lab.ChargesPerOrder, Holds: mode == lab.Protected, Detail: "max 2 succeeded charges for one order (want ≤ 1)"},
			{Invariant: lab.OrdersPerKey, Holds: true, Detail: "1 order per key"},
			{Invariant: lab.PaidOrders, Holds: true, Detail: "1 paid order"},
		},
		Ledger: []lab.Charge{charge("ch_1")},
		Events: []lab.Event{
			{AtMS: 0, Lane: "client", Kind: "attempt", Label: "POST checkout · attempt 1", Detail: "sent attempt 1", Message: 0},
			{AtMS: 2, Lane: "shop", Kind: "charge", Label: "POST /charges: charged $39.00", ChargeID: "ch_1", Message: 1},
			{AtMS: 3, Lane: "client", Kind: "lost", Label: "no answer", Detail: "no answer: the connection was lost", Message: -1, Mark: true, Tone: "fault"},
			{AtMS: 1900, Lane: "client", Kind: "attempt", Label: "POST checkout · attempt 2", Message: 2},
			{AtMS: 1905, Lane: "shop", Kind: "answer", Label: "answer 201", Message: 3},
		},
		Messages: []lab.Message{
			{From: "client", To: "shop", Kind: lab.MessageRequest, Answers: -1},
			{From: "shop", To: "gateway", Kind: lab.MessageRequest, Answers: -1},
			{From: "client", To: "shop", Kind: lab.MessageRequest, Answers: -1},
			{From: "shop", To: "client", Kind: lab.MessageResponse, Answers: 2},
		},
		Reconciliation: &payments.Report{Orders: 1, PaidOrders: 1, SucceededCharges: 1},
		Took:           2 * time.Second}
	if mode == lab.Unprotected {
		r.Off = payments.SwitchDerivedGatewayKey
		r.Unsettled = "after 10s: a webhook delivery is pending"
		r.Ledger = append(r.Ledger, charge("ch_2"))
		r.Events = append(r.Events, lab.Event{AtMS: 1903, Lane: "shop", Kind: "charge", Label: "second charge!", ChargeID: "ch_2",
			Decisive: true, Tone: "harm", Message: 4})
		r.Messages = append(r.Messages, lab.Message{From: "shop", To: "gateway", Kind: lab.MessageRequest, Answers: -1})
	}
	for _, s := range fakeScenarios {
		if s.Name == name {
			lab.Judge(s, &r)
			lab.Assess(&r, s.PaidOrders)
		}
	}
	return r, nil
}

// mustLabServer serves the lab's pages with runner, keeping runs in a fresh SQLite database.
func mustLabServer(tb testing.TB, runner handlers.LabRunner) (*httptest.Server, *handlers.LabPages) {
	tb.Helper()
	e := handlers.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	h := &handlers.LabPages{Runner: runner, Runs: models.NewLabRunStore(modelstest.MustOpen(tb, models.SQLite)), GatewayURL: "http://gateway.test"}
	h.Routes(e)
	srv := httptest.NewServer(e)
	tb.Cleanup(func() { h.Wait(); srv.Close() })
	return srv, h
}

func TestLabCatalogue(t *testing.T) {
	srv, _ := mustLabServer(t, &fakeLabRunner{})
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
		if got := card.AttrOr("data-family", ""); got != s.Family {
			t.Errorf("scenario %s: got family %q, want %q", s.Name, got, s.Family)
		}
		if got, want := card.Find(`[data-testid="lab-command"]`).Text(), "go run ./cmd/shop lab run "+s.Name; got != want {
			t.Errorf("scenario %s: got command %q, want %q", s.Name, got, want)
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
	if got := doc.Find(`[data-testid="lab-family"]`).Length(); got != 2 {
		t.Errorf("got %d families, want 2 (client, boundaries)", got)
	}
	if doc.Find(`[data-testid="lab-index"] a[href="#scenario-new_purchase"]`).Length() != 1 {
		t.Error("the index does not link to new_purchase")
	}
	if doc.Find(`button[disabled]`).Length() != 0 {
		t.Error("run buttons are disabled with no run going on")
	}
}

// mustRun starts mode's run of lost_response, waits for it and returns its page's path.
func mustRun(t *testing.T, b *browser, h *handlers.LabPages, scenario, mode string) string {
	t.Helper()
	resp, _ := b.MustPost(t, "/lab/"+scenario+"/run", url.Values{"mode": {mode}}, http.StatusSeeOther)
	loc := MustLocation(t, resp)
	if !strings.HasPrefix(loc, "/lab/runs/labrun_") {
		t.Fatalf("got redirect to %q, want /lab/runs/labrun_…", loc)
	}
	h.Wait()
	return loc
}

func TestLabRun(t *testing.T) {
	srv, h := mustLabServer(t, &fakeLabRunner{})
	b := MustBrowser(t, srv)
	b.MustGet(t, "/lab", http.StatusOK)
	for _, tc := range []struct {
		mode, outcome, overcharge, headline, tag string
		harm                                     bool
	}{
		{"unprotected", "double_charge", "3900", "Charged twice: 2 × $39.00 for one order", "expected with protection off", true},
		{"protected", "clean", "0", "Charged once: $39.00", "every protection on", false},
	} {
		loc := mustRun(t, b, h, "lost_response", tc.mode)
		doc := b.MustGet(t, loc, http.StatusOK)
		v := doc.Find(`[data-testid="lab-verdict"]`)
		for attr, want := range map[string]string{"data-mode": tc.mode, "data-outcome": tc.outcome, "data-overcharge": tc.overcharge, "data-currency": "USD", "data-ok": "true"} {
			if got := v.AttrOr(attr, ""); got != want {
				t.Errorf("%s: verdict %s=%q, want %q", tc.mode, attr, got, want)
			}
		}
		if !strings.Contains(v.Text(), tc.headline) || !strings.Contains(v.Text(), tc.tag) {
			t.Errorf("%s: got verdict %q, want %q and %q", tc.mode, v.Text(), tc.headline, tc.tag)
		}
		if got := v.HasClass("lab-verdict-harm"); got != tc.harm {
			t.Errorf("%s: verdict drawn as harm=%v, want %v", tc.mode, got, tc.harm)
		}
		if n := doc.Find(`[data-testid="lab-check"]`).Length(); n != 3 {
			t.Errorf("%s: got %d invariant rows, want 3", tc.mode, n)
		}
		if n := doc.Find(`[data-testid="lab-lane"]`).Length(); n != len(lab.Lanes) {
			t.Errorf("%s: got %d lanes, want %d", tc.mode, n, len(lab.Lanes))
		}
		events := doc.Find(`[data-testid="lab-event"]`)
		if n := events.Length(); n != map[string]int{"unprotected": 6, "protected": 5}[tc.mode] {
			t.Errorf("%s: got %d events, want one per event of the run", tc.mode, n)
		}
		if doc.Find(`[data-testid="lab-gap"]`).Length() != 1 {
			t.Errorf("%s: want one break for the 1.9 s gap", tc.mode)
		}
		if doc.Find(`[data-testid="lab-mark"]`).Length() != 1 || doc.Find(`[data-testid="lab-arrow"]`).Length() != events.Length()-1 {
			t.Errorf("%s: want one mark (the lost answer) and an arrow for every other event", tc.mode)
		}
		back := doc.Find(`[data-testid="lab-arrow"][data-kind="response"]`)
		if back.AttrOr("data-from", "") != "shop" || back.AttrOr("data-to", "") != "client" || !back.HasClass("lab-leftward") {
			t.Errorf("%s: the response goes %s → %s, want shop → client, drawn leftward", tc.mode, back.AttrOr("data-from", ""), back.AttrOr("data-to", ""))
		}
		decisive := doc.Find(`[data-testid="lab-event"][data-decisive="true"]`)
		if want := map[string]int{"unprotected": 1, "protected": 0}[tc.mode]; decisive.Length() != want ||
			want == 1 && decisive.AttrOr("data-charge-id", "") != "ch_2" {
			t.Errorf("%s: got %d decisive events, want %d (the second charge)", tc.mode, decisive.Length(), want)
		}
		if doc.Find(`[data-testid="lab-event"] details.lab-label`).Length() != events.Length() {
			t.Errorf("%s: want every event's full text behind a click", tc.mode)
		}
		unsettled := doc.Find(`[data-testid="lab-unsettled"]`)
		if want := tc.mode == "unprotected"; want != (unsettled.Length() == 1) {
			t.Errorf("%s: got unsettled note %q, want one only when the run did not settle", tc.mode, unsettled.Text())
		}
		for _, link := range []string{"ledger", "deliveries", "reconciliation"} {
			if doc.Find(`a[href="`+loc+"/"+link+`"]`).Length() != 1 {
				t.Errorf("%s: want a link to the run's own %s", tc.mode, link)
			}
			b.MustGet(t, loc+"/"+link, http.StatusOK)
		}
		ledger := b.MustGet(t, loc+"/ledger", http.StatusOK)
		if n := ledger.Find(`[data-testid="lab-ledger-charge"]`).Length(); n != map[string]int{"unprotected": 2, "protected": 1}[tc.mode] {
			t.Errorf("%s: the run's ledger has %d charges", tc.mode, n)
		}
	}
	// The catalogue shows the last run of each mode.
	doc := b.MustGet(t, "/lab", http.StatusOK)
	if n := doc.Find(`[data-scenario="lost_response"] [data-testid="lab-last"]`).Length(); n != 2 {
		t.Errorf("got %d last results on the card, want 2", n)
	}
	b.MustGet(t, "/lab/lost_response/compare", http.StatusOK)
}

// TestLabRunKept: a run is listed at /lab/runs and exported as JSON (the run schema) and as a
// Mermaid diagram.
func TestLabRunKept(t *testing.T) {
	srv, h := mustLabServer(t, &fakeLabRunner{})
	b := MustBrowser(t, srv)
	b.MustGet(t, "/lab", http.StatusOK)
	loc := mustRun(t, b, h, "lost_response", "unprotected")
	list := b.MustGet(t, "/lab/runs", http.StatusOK)
	if list.Find(`[data-testid="lab-run"] a[href="`+loc+`"]`).Length() != 1 {
		t.Errorf("/lab/runs does not list %s", loc)
	}
	res, err := http.Get(srv.URL + loc + ".json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var run map[string]any
	if err := json.NewDecoder(res.Body).Decode(&run); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s.json: %d, %v", loc, res.StatusCode, err)
	}
	for _, k := range []string{"id", "scenario", "mode", "off", "database", "seed", "outcome", "overcharged", "invariants", "events", "messages", "ledger", "reconciliation"} {
		if _, ok := run[k]; !ok {
			t.Errorf("the run's JSON has no %q", k)
		}
	}
	if run["id"] != strings.TrimPrefix(loc, "/lab/runs/") || run["outcome"] != "double_charge" {
		t.Errorf("got id %v outcome %v, want the run's", run["id"], run["outcome"])
	}
	mmd, err := http.Get(srv.URL + loc + ".mmd")
	if err != nil {
		t.Fatal(err)
	}
	defer mmd.Body.Close()
	body, _ := io.ReadAll(mmd.Body)
	if !strings.HasPrefix(string(body), "sequenceDiagram") || !strings.Contains(string(body), "shop-->>client") ||
		!strings.HasPrefix(mmd.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("got %s %q, want a Mermaid sequenceDiagram with the response", mmd.Header.Get("Content-Type"), body)
	}
}

func TestLabRunRefusals(t *testing.T) {
	runner := &fakeLabRunner{}
	srv, _ := mustLabServer(t, runner)
	b := MustBrowser(t, srv)
	b.MustGet(t, "/lab", http.StatusOK)
	b.MustPost(t, "/lab/no_such_scenario/run", url.Values{"mode": {"protected"}}, http.StatusNotFound)
	b.MustPost(t, "/lab/lost_response/run", url.Values{"mode": {"sideways"}}, http.StatusBadRequest)
	b.MustGet(t, "/lab/runs/labrun_unknown", http.StatusNotFound)
	b.MustGet(t, "/lab/runs/labrun_unknown.json", http.StatusNotFound)
	b.MustPost(t, "/lab/lost_response/run", url.Values{"mode": {"protected"}, "_csrf": {""}}, http.StatusBadRequest)
	fresh := MustBrowser(t, srv) // no CSRF cookie at all
	fresh.MustPost(t, "/lab/lost_response/run", url.Values{"mode": {"protected"}, "_csrf": {"forged"}}, http.StatusBadRequest)
	if len(runner.calls) != 0 {
		t.Errorf("got runs %v, want none", runner.calls)
	}
}

// TestLabRunOneAtATime: while a run is going, its page says so and refreshes, every run
// button is disabled, and a second run is refused with 409.
func TestLabRunOneAtATime(t *testing.T) {
	runner := &fakeLabRunner{hold: make(chan struct{})}
	srv, h := mustLabServer(t, runner)
	first, second := MustBrowser(t, srv), MustBrowser(t, srv)
	first.MustGet(t, "/lab", http.StatusOK)
	second.MustGet(t, "/lab", http.StatusOK)
	resp, _ := first.MustPost(t, "/lab/lost_response/run", url.Values{"mode": {"protected"}}, http.StatusSeeOther)
	loc := MustLocation(t, resp)
	page := first.MustGet(t, loc, http.StatusOK)
	if page.Find(`[data-testid="lab-running"]`).Length() != 1 || page.Find(`[data-testid="lab-verdict"]`).Length() != 0 {
		t.Error("want the running page, with no verdict yet")
	}
	_, doc := second.MustPost(t, "/lab/new_purchase/run", url.Values{"mode": {"protected"}}, http.StatusConflict)
	if doc.Find(`[data-testid="lab-busy"]`).Length() != 1 || doc.Find(`a[href="`+loc+`"]`).Length() != 1 {
		t.Error("want the run-in-progress page, linking to the run going on")
	}
	cat := second.MustGet(t, "/lab", http.StatusOK)
	if all, off := cat.Find(`[data-testid="lab-run-button"]`).Length(), cat.Find(`[data-testid="lab-run-button"][disabled]`).Length(); all == 0 || off != all {
		t.Errorf("got %d of %d run buttons disabled during a run, want all", off, all)
	}
	close(runner.hold)
	h.Wait()
	done := first.MustGet(t, loc, http.StatusOK)
	if done.Find(`[data-testid="lab-verdict"]`).Length() != 1 || done.Find(`button[disabled]`).Length() != 0 {
		t.Error("after the run: want its verdict, and the buttons enabled again")
	}
	if len(runner.calls) != 1 {
		t.Errorf("got runs %v, want only the first", runner.calls)
	}
}

// TestLabTimeline: an arrow spans the lanes from its sender to its receiver, leftward when
// it goes back; a long gap gets a break; presenter prompts come before the first event and
// before each decisive one.
func TestLabTimeline(t *testing.T) {
	r := lab.Result{
		Events: []lab.Event{
			{AtMS: 0, Lane: "client", Message: 0},
			{AtMS: 5, Lane: "shop", Message: 1, Decisive: true},
			{AtMS: 3000, Lane: "gateway", Message: 2},
			{AtMS: 3001, Lane: "shop", Message: -1, Mark: true},
		},
		Messages: []lab.Message{
			{From: "client", To: "shop", Kind: lab.MessageRequest, Answers: -1},
			{From: "shop", To: "gateway", Kind: lab.MessageRequest, Answers: -1},
			{From: "gateway", To: "client", Kind: lab.MessageResponse, Answers: 0},
		},
	}
	tl := handlers.LabTimeline(r, "/lab/runs/x/ledger", []string{"one?", "two?", "three?"})
	type geo struct {
		start, span int
		left        bool
		prompt      string
	}
	var got []geo
	gaps := 0
	for _, row := range tl.Rows {
		if row.Gap != "" {
			gaps++
			continue
		}
		got = append(got, geo{row.Start, row.Span, row.Leftward, row.Prompt})
	}
	want := []geo{{0, 2, false, "one?"}, {1, 3, false, "two?"}, {0, 4, true, ""}, {1, 1, false, ""}}
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if gaps != 1 {
		t.Errorf("got %d breaks, want 1 (for the 3 s gap)", gaps)
	}
}
