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
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"checkoutlab/handlers"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments/lab"
)

// fakeChaosRunner reports some progress, waits for release, then answers a judged run with a
// double charge.
type fakeChaosRunner struct {
	reported chan struct{}
	release  chan struct{}
}

func (f *fakeChaosRunner) RunChaos(ctx context.Context, o lab.ChaosOptions, report func(lab.ChaosProgress)) (*lab.ChaosResult, error) {
	report(lab.ChaosProgress{Phase: "purchasing", Done: 3, Total: o.Purchases, Answered: 3, Faults: 2, Kills: 1})
	close(f.reported)
	<-f.release
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	return &lab.ChaosResult{Seed: o.Seed, Purchases: o.Purchases, Replicas: o.Replicas, Off: o.Off, Database: "sqlite",
		Answered: o.Purchases, DoubleCharges: 1, Overcharged: []lab.Money{{Amount: 3900, Currency: "USD"}},
		Kills: 1, Faults: 2, OK: true, Verdict: "reproduced: without derived_gateway_key, 1 double charge(s)",
		Invariants: []lab.Check{{Invariant: lab.ChargesPerOrder, Holds: false, Detail: "1 charge beyond an order's first"}},
		Points:     []lab.ChaosPoint{{AtMS: 100, Outcome: "paid"}, {AtMS: 300, Outcome: "gave_up"}},
		Marks:      []lab.ChaosMark{{AtMS: 50, Kind: "fault", Label: "commit_then_drop"}, {AtMS: 200, Kind: "kill", Label: "SIGKILL", Replica: 2}},
		Worst: []lab.ChaosWorst{{Purchase: 1, Tenant: "acme", OrderID: "ord_worst", Why: "charged 2 times",
			Timeline: []lab.Row{{At: t0, Actor: "client", Kind: "client.attempt", Detail: "sent attempt 1"}}}},
	}, nil
}

func TestChaosPages(t *testing.T) {
	runner := &fakeChaosRunner{reported: make(chan struct{}), release: make(chan struct{})}
	e := handlers.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	(&handlers.ChaosPages{Runner: runner, Store: models.NewChaosRunStore(modelstest.MustOpen(t, models.SQLite))}).Routes(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	b := MustBrowser(t, srv)

	form := b.MustGet(t, "/lab/chaos", http.StatusOK)
	if form.Find(`[data-testid="chaos-form"] input[name=_csrf]`).AttrOr("value", "") == "" || form.Find(`select[name=off] option`).Length() < 2 {
		t.Fatalf("the form lacks its CSRF field or its switches")
	}
	b.MustPost(t, "/lab/chaos", url.Values{"seed": {"1"}, "purchases": {"0"}, "replicas": {"2"}}, http.StatusBadRequest)
	b.MustPost(t, "/lab/chaos", url.Values{"seed": {"1"}, "purchases": {"10"}, "replicas": {"2"}, "off": {"seatbelts"}}, http.StatusBadRequest)

	resp, _ := b.MustPost(t, "/lab/chaos", url.Values{"seed": {"5"}, "purchases": {"10"}, "replicas": {"2"}, "off": {"derived_gateway_key"}}, http.StatusSeeOther)
	loc := MustLocation(t, resp)
	if !strings.HasPrefix(loc, "/lab/chaos/runs/") {
		t.Fatalf("got redirect to %q, want /lab/chaos/runs/…", loc)
	}
	<-runner.reported
	page := b.MustGet(t, loc, http.StatusOK)
	progress := page.Find(`[data-testid="chaos-progress"]`)
	if progress.AttrOr("data-done", "") != "3" || progress.AttrOr("data-total", "") != "10" || progress.AttrOr("hx-get", "") != loc+"/progress" {
		t.Errorf("progress: got done %q of %q polling %q, want 3 of 10 polling %s/progress",
			progress.AttrOr("data-done", ""), progress.AttrOr("data-total", ""), progress.AttrOr("hx-get", ""), loc)
	}
	if got := page.Find(`[data-testid="chaos-progress-kills"]`).Text(); got != "1" {
		t.Errorf("progress: got %q kills, want 1", got)
	}
	if _, busy := b.MustPost(t, "/lab/chaos", url.Values{"seed": {"1"}, "purchases": {"10"}, "replicas": {"2"}}, http.StatusConflict); busy.Find(`[data-testid="chaos-busy"]`).Length() != 1 {
		t.Errorf("a second run while one goes on: want the busy page")
	}
	if b.MustGet(t, "/lab/chaos", http.StatusOK).Find(`[data-testid="chaos-start"][disabled]`).Length() != 1 {
		t.Errorf("while a run goes on, want the start button disabled")
	}

	close(runner.release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := http.Get(srv.URL + loc + "/progress")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.Header.Get("HX-Refresh") == "true" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the progress poll never asked for a reload after the run ended")
		}
		time.Sleep(20 * time.Millisecond)
	}
	result := b.MustGet(t, loc, http.StatusOK)
	verdict := result.Find(`[data-testid="chaos-verdict"]`)
	if verdict.AttrOr("data-ok", "") != "true" || verdict.AttrOr("data-overcharge", "") != "3900" || !strings.Contains(verdict.Text(), "reproduced") {
		t.Errorf("verdict: got %q ok=%s overcharge=%s, want reproduced, ok, 3900", verdict.Text(), verdict.AttrOr("data-ok", ""), verdict.AttrOr("data-overcharge", ""))
	}
	if got := result.Find(`[data-testid="chaos-overcharge"]`).Text(); got != "$39.00" {
		t.Errorf("overcharge: got %q, want $39.00", got)
	}
	if n := result.Find(`svg[data-testid="chaos-chart"] [data-testid="chaos-mark"]`).Length(); n != 2 {
		t.Errorf("chart: got %d marks, want a fault and a kill", n)
	}
	link := result.Find(`[data-testid="chaos-worst"] a`).AttrOr("href", "")
	if link != loc+"/orders/ord_worst" {
		t.Fatalf("worst purchase link: got %q, want %s/orders/ord_worst", link, loc)
	}
	if n := b.MustGet(t, link, http.StatusOK).Find(`[data-testid="chaos-timeline"] tbody tr`).Length(); n != 1 {
		t.Errorf("timeline: got %d rows, want 1", n)
	}
	b.MustGet(t, loc+"/orders/ord_other", http.StatusNotFound)

	res, err := http.Get(srv.URL + loc + ".json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var got map[string]any
	if err := json.NewDecoder(res.Body).Decode(&got); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("run JSON: %d %v", res.StatusCode, err)
	}
	if got["seed"] != float64(5) || got["double_charges"] != float64(1) || got["ok"] != true {
		t.Errorf("run JSON: got seed %v, double_charges %v, ok %v; want 5, 1, true", got["seed"], got["double_charges"], got["ok"])
	}
	if b.MustGet(t, "/lab/chaos", http.StatusOK).Find(`[data-testid="chaos-runs"] a[href="`+loc+`"]`).Length() != 1 {
		t.Errorf("the form does not list the run")
	}
}
