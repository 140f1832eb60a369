package bench

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// wideResult has every section, with figures as wide as a slow or a fast machine makes them.
func wideResult() *Result {
	wide := Spread{Median: 1234.5, Min: 123.45, Max: 9999.9, N: 5} // 10,000 req/s, or 10 s
	sum := Summary{Throughput: wide, P50Ms: wide, P99Ms: wide, Requests: 999999, Unexpected: 12345,
		FirstError: "Post \"http://127.0.0.1:40000/api/v1/checkout\": connection reset by peer"}
	drained := 12.3
	res := &Result{
		Machine: Machine{CPUs: 128, GoVersion: "go1.26.8", OS: "linux/amd64", Dialect: "postgres",
			DatabaseVersion: "15.20 (Debian 15.20-0+deb12u1)", LoadStart: []float64{10.5, 9.25, 8.75}, LoadEnd: []float64{1, 2, 3},
			StartedAt: time.Now()},
		Settings: Settings{DurationS: 240, Clients: 128, Rounds: 5, CellS: 1.8, SustainedS: 60},
		Phases: PhaseTiming{WindowS: 6, Checkouts: 9999, Spans: []SpanStat{
			{Name: strings.Repeat("a very long span name ", 6), Count: 123456, P50Ms: 12345.67, MeanMs: 12345.67}}},
		Counters: &Counters{Protected: CounterWindow{Checkouts: 99999, CommitsPerCheckout: 32.5, NetCommitsPerCheckout: 31.9,
			IdleCommitsPerS: 12.3, Groups: []TableRows{{"shop", 28.1, 14.2}, {"gateway (gw_)", 12.1, 3.3}, {"job queue (river_)", 2, 6}},
			Tables: []TableRows{{strings.Repeat("table_", 10), 1.5, 2.25}}}},
		Sustained: Sustained{Clients: 128, DurationS: 60, Checkouts: 999999, Throughput: 9999, P50Ms: 1234.56, P99Ms: 12345.67,
			Deliveries: Backlog{AtEnd: 999999, MadeDuringLoad: 999999, MadeRatePerS: 9999, DoneDuringLoad: 999999,
				DoneRatePerS: 9999, BehindS: 99.9, WorkS: &drained},
			Jobs: Backlog{AtEnd: 999999, MadeDuringLoad: 999999, MadeRatePerS: 9999, DoneDuringLoad: 999999,
				DoneRatePerS: 9999, BehindS: 99.9}, DrainBoundS: 60},
		Memory: Memory{IdleRSSMiB: 28, LoadRSSMiB: 45, PeakMiB: 60},
		Errors: []string{"database counters: something"},
	}
	for _, path := range []string{checkoutPath, ordersPath} {
		res.Creation = append(res.Creation, CreationRow{Endpoint: path, Clients: 128, Protected: sum, Unprotected: sum, Ratio: wide})
		res.Replay = append(res.Replay, ReplayRow{Endpoint: path, Clients: 128, Replay: sum, RatioToCreation: wide})
	}
	res.SameKey = []SameKeyRow{{Prefer: "", Requests: 999, Created: 1, Replays: 19, Conflicts: 999, MaxRetryAfterS: 30,
		AfterWinnerP50Ms: 31234, AfterWinnerP99Ms: 31234, AfterWinnerMaxMs: 31234, TimedOut: 20, BoundS: 40, TookS: 40},
		{Prefer: "wait=2", Requests: 20, Created: 1, Replays: 19}}
	res.Targets = targets(res, 128)
	return res
}

func TestReportFitsOneHundredColumns(t *testing.T) {
	var b strings.Builder
	if err := writeReport(&b, wideResult()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for i, line := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(line); n > 100 {
			t.Errorf("line %d has %d columns:\n%s", i+1, n, line)
		}
	}
	for _, want := range []string{"Creation", "ratio p/u", "Replay", "Same key", "Time per phase", "Database counters",
		"Sustained", "memory (VmRSS)", "Targets of issue 16", "load average: 10.50 9.25 8.75 at start", "not measured: database counters"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}

func TestReportSaysWhenNoSpansWereRecorded(t *testing.T) {
	res := wideResult()
	res.Phases.Spans = nil
	var b strings.Builder
	if err := writeReport(&b, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "no spans recorded") {
		t.Errorf("no \"no spans recorded\" in:\n%s", b.String())
	}
}
