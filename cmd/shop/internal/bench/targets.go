package bench

import "fmt"

// Target is one of issue 16's targets beside what this run measured. Targets are reported,
// never asserted: Met is null when the run could not measure the figure.
type Target struct {
	Name     string `json:"name"`
	Measured string `json:"measured"`
	Target   string `json:"target"`
	Met      *bool  `json:"met"`
}

func met(ok bool) *bool { return &ok }

// spreadText is "0.93 (0.90–0.95)".
func spreadText(s Spread, format string) string {
	if s.N == 0 {
		return "not measured"
	}
	return fmt.Sprintf(format+" ("+format+"–"+format+")", s.Median, s.Min, s.Max)
}

// targets sets the run's figures against issue 16's targets.
func targets(res *Result, clients int) []Target {
	var ts []Target
	for _, row := range res.Creation {
		if row.Endpoint == checkoutPath && row.Clients == clients && row.Ratio.N > 0 {
			ts = append(ts, Target{Name: fmt.Sprintf("protected/unprotected checkout at %d clients", clients),
				Measured: spreadText(row.Ratio, "%.2f"), Target: "≥ 0.9", Met: met(row.Ratio.Median >= 0.9)})
		}
	}
	for _, row := range res.Replay {
		if row.Clients != clients || row.RatioToCreation.N == 0 {
			continue
		}
		ts = append(ts, Target{Name: fmt.Sprintf("replay/creation, %s at %d clients", short(row.Endpoint), clients),
			Measured: spreadText(row.RatioToCreation, "%.1f"), Target: "≥ 3", Met: met(row.RatioToCreation.Median >= 3)})
		ts = append(ts, Target{Name: fmt.Sprintf("replay p99, %s at %d clients", short(row.Endpoint), clients),
			Measured: spreadText(row.Replay.P99Ms, "%.1f") + " ms", Target: "< 5 ms", Met: met(row.Replay.P99Ms.Median < 5)})
	}
	for _, row := range res.SameKey {
		if row.Prefer == "" {
			ts = append(ts, Target{Name: "20 on one key, no Prefer: largest Retry-After",
				Measured: fmt.Sprintf("%d s", row.MaxRetryAfterS), Target: "≤ 2 s", Met: met(row.MaxRetryAfterS <= 2 && row.TimedOut == 0)})
			continue
		}
		ts = append(ts, Target{Name: "20 on one key, Prefer: " + row.Prefer + ": p99 after the winner",
			Measured: fmt.Sprintf("%.0f ms", row.AfterWinnerP99Ms), Target: "≤ 50 ms",
			Met: met(row.TimedOut == 0 && row.Created == 1 && row.AfterWinnerP99Ms <= 50)})
	}
	s := res.Sustained
	for _, b := range []struct {
		name string
		b    Backlog
	}{{"webhook deliveries", s.Deliveries}, {"jobs", s.Jobs}} {
		ts = append(ts, Target{Name: fmt.Sprintf("backlog of %s after %.0f s, %d clients", b.name, s.DurationS, s.Clients),
			Measured: fmt.Sprintf("%d = %.1f s of work", b.b.AtEnd, b.b.WorkS), Target: "< 1 s of work",
			Met: met(b.b.AtEnd >= 0 && b.b.WorkS < 1)})
	}
	ts = append(ts, Target{Name: "protected orders / pgbench of its statements",
		Measured: "not measured yet", Target: "≥ 0.7"})
	return ts
}
