package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestBenchJSON runs `shop bench --duration 2s --json` on SQLite and checks that stdout is
// one JSON object with every top-level field and a figure in each phase. The figures
// themselves are not asserted: they are the machine's. (On PostgreSQL the counted windows
// wait out pg_stat's flush delay, about 35 s, too long for the suite; `shop bench
// --database-url` is run by hand, see docs/benchmarks.md.)
func TestBenchJSON(t *testing.T) {
	t.Parallel() // mostly waiting: it runs beside TestLab and TestChaos (see TestMain)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, []string{"bench", "--duration", "2s", "--clients", "4", "--json"}, envOf(nil), &out); err != nil {
		t.Fatalf("shop bench: %v", err)
	}
	var res map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(out.String()))
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, out.String())
	}
	if dec.More() {
		t.Errorf("stdout holds more than one JSON value:\n%s", out.String())
	}
	for _, field := range []string{"machine", "settings", "creation", "replay", "same_key", "phase_timing",
		"db_counters", "sustained", "memory", "targets", "errors", "took_s"} {
		if _, ok := res[field]; !ok {
			t.Errorf("no top-level field %q in:\n%s", field, out.String())
		}
	}
	var figures struct {
		Machine  struct{ Dialect string } `json:"machine"`
		Creation []struct {
			Endpoint string
			Clients  int
		} `json:"creation"`
		Replay    []json.RawMessage       `json:"replay"`
		SameKey   []json.RawMessage       `json:"same_key"`
		Counters  *json.RawMessage        `json:"db_counters"`
		Sustained struct{ Checkouts int } `json:"sustained"`
	}
	if err := json.Unmarshal([]byte(out.String()), &figures); err != nil {
		t.Fatalf("decode the figures: %v", err)
	}
	// Two endpoints at 1 and 4 clients; both same-key steps; no PostgreSQL counters on SQLite.
	if figures.Machine.Dialect != "sqlite" || len(figures.Creation) != 4 || len(figures.Replay) != 4 ||
		len(figures.SameKey) != 2 || figures.Counters != nil || figures.Sustained.Checkouts == 0 {
		t.Errorf("unexpected shape of the figures:\n%s", out.String())
	}
}

func TestBenchRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{{"bench", "--clients", "0"}, {"bench", "--duration", "-1s"}, {"bench", "extra"}} {
		if err := run(context.Background(), args, envOf(nil), &strings.Builder{}); err == nil {
			t.Errorf("shop %s: no error", strings.Join(args, " "))
		}
	}
}
