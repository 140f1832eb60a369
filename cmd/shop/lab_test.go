package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"checkoutlab/cmd/shop/internal/labrun"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments/lab"
)

// TestLab runs every scenario of the failure lab both ways, on each database: with every
// protection on, every invariant must hold; with the scenario's protection off, its invariant
// must break (or, for a boundary scenario, still hold). Each run is a fresh stack with the
// configuration and wiring `go run ./cmd/shop` uses, in this process or, for a crash
// scenario, with the shop as a child process that really dies. The two databases run side by side; the runs of one database run
// one after the other, since most of a run is waiting (leases, webhook delays).
func TestLab(t *testing.T) {
	t.Parallel() // TestLab and TestChaos run side by side, after the other tests: see TestMain
	for _, dialect := range []string{models.SQLite, models.Postgres} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			for _, s := range lab.Scenarios {
				for _, mode := range []lab.Mode{lab.Protected, lab.Unprotected} {
					t.Run(s.Name+"/"+string(mode), func(t *testing.T) {
						r := testLab(t, modelstest.MustDatabaseURL(t, dialect)).RunScenario(context.Background(), s, mode)
						if !r.OK {
							t.Errorf("got verdict %q, want ok; invariants %+v", r.Verdict, r.Checks)
						}
						if r.Err == "" && s.PaidOrders+len(s.Steps) > 0 && (len(r.Timeline) == 0 || len(r.Messages) == 0) {
							t.Errorf("got %d journal rows and %d messages, want the run's timeline", len(r.Timeline), len(r.Messages))
						}
						// What happened to the customer: harm exactly when the run breaks what it is about.
						if want := mode == lab.Unprotected && s.Breaks != ""; r.Harmful() != want {
							t.Errorf("got outcome %q (overcharged %d), want harm=%v", r.Outcome, r.Overcharged.Amount, want)
						}
					})
				}
			}
		})
	}
}

// TestProductionHasEveryProtection: no variable or flag of `serve` turns a protection off;
// only the lab's own `lab shop --off` does, and it refuses a switch that does not exist.
func TestProductionHasEveryProtection(t *testing.T) {
	env := map[string]string{"PROTECTIONS": "off", "LAB_SWITCH": "server_idempotency", "OFF": "server_idempotency"}
	cfg, err := loadConfig(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Protections.Off != "" {
		t.Errorf("got protection %q off, want every protection on", cfg.Protections.Off)
	}
	for _, flag := range []string{"--off", "--protection-off", "--lab-switch"} {
		if _, err := loadConfig([]string{flag, "server_idempotency"}, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("serve accepted %s, want no flag that turns a protection off", flag)
		}
	}
	if err := run(context.Background(), []string{"lab", "shop", "--off", "no_such_switch"}, envOf(nil), io.Discard); err == nil {
		t.Errorf("lab shop accepted an unknown switch, want an error")
	}
}

// TestLabAgainstRunningShop: `lab run --shop URL` plays scenarios against a shop someone
// started, judges them through its HTTP views, and skips what needs a lab stack of its own.
// Other customers keep buying meanwhile: their orders must not count as the run's.
func TestLabAgainstRunningShop(t *testing.T) {
	st := MustStartShop(t, models.SQLite, map[string]string{"GATEWAY_TIMEOUT": "1s"})
	stop := make(chan struct{})
	others := make(chan int)
	go func() {
		n := 0
		defer func() { others <- n }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			body := labrun.CheckoutBody(lab.Checkout{}, "someone@example.com")
			if a := post(st.Shop, "/api/v1/checkout", fmt.Sprintf("another-customer-%d", i), body); a.Status == http.StatusCreated {
				n++
			}
		}
	}()
	var out bytes.Buffer
	err := run(context.Background(), []string{"lab", "run", "--json", "--shop", st.Shop, "--gateway", st.Gateway.URL,
		"lost_response", "webhook_before_response", "crash_before_response", "retry_after_retention"}, envOf(nil), &out)
	close(stop)
	if n := <-others; n == 0 {
		t.Errorf("no other customer's checkout went through during the runs, want some to show they are not counted")
	}
	if err != nil {
		t.Fatalf("lab run --shop: %v\n%s", err, out.String())
	}
	var results []lab.Result
	if err := json.Unmarshal(out.Bytes(), &results); err != nil {
		t.Fatalf("decode %q: %v", out.String(), err)
	}
	var ran []string
	for _, r := range results {
		ran = append(ran, r.Scenario)
		if !r.OK || r.Mode != lab.Protected || r.Shop != st.Shop || len(r.Timeline) == 0 {
			t.Errorf("%s: got ok=%v mode=%s shop=%q, %d timeline rows (%s), want a protected run against %s, ok, with a timeline",
				r.Scenario, r.OK, r.Mode, r.Shop, len(r.Timeline), r.Verdict, st.Shop)
		}
	}
	if got, want := strings.Join(ran, ","), "lost_response,webhook_before_response"; got != want {
		t.Errorf("ran %s, want %s (a crash point and an early reaper need a lab stack)", got, want)
	}
	var armed struct{ Faults []any }
	req, _ := http.NewRequest(http.MethodGet, st.Gateway.URL+"/_control/faults", nil)
	req.Header.Set("Authorization", "Bearer "+st.Gateway.Token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&armed); err != nil || len(armed.Faults) > 0 {
		t.Errorf("got armed faults %v (%v) after the runs, want none left for the shop's real traffic", armed.Faults, err)
	}
}

// TestLabCLI: `lab run --json` prints one JSON array of runs in the run schema; the default
// table and --timeline fit 100 columns, with the stacks' logs kept off stdout; -h of the
// program and of every lab command exits 0 (flag.ErrHelp) and lists what exists.
func TestLabCLI(t *testing.T) {
	t.Parallel() // mostly waiting: it runs beside TestLab and TestChaos (see TestMain)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"lab", "run", "--json", "lost_response"}, envOf(nil), &out); err != nil {
		t.Fatalf("lab run --json: %v\n%s", err, out.String())
	}
	var runs []map[string]any
	if err := json.Unmarshal(out.Bytes(), &runs); err != nil || len(runs) != 2 {
		t.Fatalf("got %d runs (%v) from %q, want one JSON array of 2", len(runs), err, out.String())
	}
	for _, r := range runs {
		for _, k := range []string{"id", "scenario", "mode", "off", "database", "seed", "outcome", "overcharged", "invariants", "events", "messages", "ledger", "reconciliation"} {
			if _, ok := r[k]; !ok {
				t.Errorf("%v %v: the run has no %q", r["scenario"], r["mode"], k)
			}
		}
		inv, _ := r["invariants"].([]any)
		if first, _ := inv[0].(map[string]any); first["name"] == nil || first["holds"] == nil || first["detail"] == nil {
			t.Errorf("got invariant %v, want name, holds and detail", inv[0])
		}
		msg, _ := r["messages"].([]any)
		if first, _ := msg[0].(map[string]any); first["from"] != "client" || first["to"] != "shop" || first["kind"] != "request" || first["at_ms"] == nil || first["label"] == nil {
			t.Errorf("got first message %v, want the client's request to the shop with its label and time", msg[0])
		}
	}
	if runs[1]["outcome"] != "double_charge" || runs[0]["outcome"] != "clean" {
		t.Errorf("got outcomes %v, %v, want clean then double_charge", runs[0]["outcome"], runs[1]["outcome"])
	}

	out.Reset()
	if err := run(context.Background(), []string{"lab", "run", "--timeline", "--verbose", "lost_response"}, envOf(nil), &out); err != nil {
		t.Fatalf("lab run --timeline: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{"✓", "Charged twice: 2 × ", "Charged once: ", "POST checkout · attempt 1", "◀╌", "⚑ second charge!", "charges_per_order"} {
		if !strings.Contains(text, want) {
			t.Errorf("the table and timeline lack %q:\n%s", want, text)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if n := len([]rune(line)); n > 100 {
			t.Errorf("a line of %d columns, want at most 100: %q", n, line)
		}
		if strings.Contains(line, "level=") {
			t.Errorf("a log line on stdout, want logs on stderr only: %q", line)
		}
	}

	for _, args := range [][]string{{"-h"}, {"lab", "-h"}, {"lab", "run", "-h"}, {"lab", "list", "-h"}, {"lab", "shop", "-h"}, {"migrate", "-h"}} {
		out.Reset()
		err := run(context.Background(), args, envOf(nil), &out)
		if !errors.Is(err, flag.ErrHelp) || out.Len() == 0 {
			t.Errorf("%v: got %v and %d bytes of usage, want flag.ErrHelp (exit 0) with the usage", args, err, out.Len())
		}
	}
	out.Reset()
	_ = run(context.Background(), []string{"lab", "-h"}, envOf(nil), &out)
	for _, sub := range []string{"list", "run", "shop"} {
		if !strings.Contains(out.String(), sub) {
			t.Errorf("shop lab -h does not list %q: %s", sub, out.String())
		}
	}
}

// TestLabRunBadInput: a wrong scenario name or a shop that is not there is a clear error, and
// nothing runs.
func TestLabRunBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "no_such_scenario"}, `no scenario "no_such_scenario"`},
		{[]string{"run", "--shop", "http://127.0.0.1:1", "double_click"}, "is the shop running?"},
		{[]string{"walk"}, "usage: shop lab"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"lab"}, c.args...), envOf(nil), &out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("lab %v: got %v, want an error with %q", c.args, err, c.want)
		}
		if strings.Contains(out.String(), "SCENARIO") {
			t.Errorf("lab %v: printed results %q, want none", c.args, out.String())
		}
	}
}
