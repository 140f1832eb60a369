package bench

import (
	"testing"
	"time"
)

func TestSpreadIsTheMedianOfTheRoundsAndTheirRange(t *testing.T) {
	for _, tc := range []struct {
		values []float64
		want   Spread
	}{
		{[]float64{3, 1, 2}, Spread{Median: 2, Min: 1, Max: 3, N: 3}},
		{[]float64{4, 1, 3, 2}, Spread{Median: 2.5, Min: 1, Max: 4, N: 4}},
		{nil, Spread{}},
	} {
		if got := spreadOf(tc.values); got != tc.want {
			t.Errorf("spreadOf(%v) = %+v, want %+v", tc.values, got, tc.want)
		}
	}
}

func TestPercentileIsTheNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]float64{50: 50, 99: 99, 100: 100, 1: 1} {
		if got := percentile(d, p); got != want {
			t.Errorf("p%v = %v ms, want %v", p, got, want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %v, want 0", got)
	}
}

func TestRatiosAreRoundByRoundAndSkipAZeroDivisor(t *testing.T) {
	got := ratios([]float64{10, 9, 8}, []float64{5, 0, 4})
	if len(got) != 2 || got[0] != 2 || got[1] != 2 {
		t.Errorf("ratios = %v, want [2 2]", got)
	}
}

func TestRetryAfterReadsWholeSeconds(t *testing.T) {
	for h, want := range map[string]time.Duration{"30": 30 * time.Second, "1": time.Second, "": 0, "soon": 0, "-1": 0} {
		if got := retryAfter(h); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", h, got, want)
		}
	}
}

func TestPlanFitsShortAndDefaultBudgets(t *testing.T) {
	short := makePlan(2*time.Second, 8)
	if short.rounds != 3 || short.cell != 100*time.Millisecond || short.sustained != 500*time.Millisecond {
		t.Errorf("2s plan = %+v, want 3 rounds of 100ms and a 500ms sustained phase", short)
	}
	def := makePlan(4*time.Minute, 8)
	if def.rounds != 5 || def.sustained != time.Minute || def.sameKeyBound != 40*time.Second {
		t.Errorf("4m plan = %+v, want 5 rounds, 60s sustained, same key bounded at 40s", def)
	}
	if one := makePlan(time.Minute, 1); len(one.clientCounts) != 1 {
		t.Errorf("--clients 1 measures %v client counts, want only 1", one.clientCounts)
	}
}
