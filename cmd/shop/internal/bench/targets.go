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

// targets sets the run's figures against issue 16's targets.
func targets(res *Result, clients int) []Target {
	var ts []Target
	for _, row := range res.Creation {
		if row.Endpoint == checkoutPath && row.Clients == clients && row.Ratio.N > 0 {
			ts = append(ts, Target{Name: fmt.Sprintf("checkout protected/unprotected, %d clients", clients),
				Measured: spreadNum(row.Ratio), Target: "≥ 0.9", Met: met(row.Ratio.Median >= 0.9)})
		}
	}
	for _, row := range res.Replay {
		if row.Clients != clients || row.RatioToCreation.N == 0 {
			continue
		}
		ts = append(ts, Target{Name: fmt.Sprintf("replay/creation, %s, %d clients", short(row.Endpoint), clients),
			Measured: spreadNum(row.RatioToCreation), Target: "≥ 3", Met: met(row.RatioToCreation.Median >= 3)})
		ts = append(ts, Target{Name: fmt.Sprintf("replay p99, %s, %d clients", short(row.Endpoint), clients),
			Measured: spreadNum(row.Replay.P99Ms) + " ms", Target: "< 5 ms", Met: met(row.Replay.P99Ms.Median < 5)})
	}
	for _, row := range res.SameKey {
		if row.Prefer == "" {
			ts = append(ts, Target{Name: "same key, no Prefer: largest Retry-After",
				Measured: fmt.Sprintf("%d s", row.MaxRetryAfterS), Target: "≤ 2 s", Met: met(row.MaxRetryAfterS <= 2 && row.TimedOut == 0)})
			continue
		}
		ts = append(ts, Target{Name: "same key, Prefer " + row.Prefer + ": p99 after winner",
			Measured: num(row.AfterWinnerP99Ms) + " ms", Target: "≤ 50 ms",
			Met: met(row.TimedOut == 0 && row.Created == 1 && row.AfterWinnerP99Ms <= 50)})
	}
	s := res.Sustained
	for _, b := range []struct {
		name string
		b    Backlog
	}{{"webhook", s.Deliveries}, {"job", s.Jobs}} {
		measured := fmt.Sprintf("%d, not drained in %.0f s", b.b.AtEnd, s.DrainBoundS)
		if b.b.WorkS != nil {
			measured = fmt.Sprintf("%d = %s s of work", b.b.AtEnd, num(*b.b.WorkS))
		}
		ts = append(ts, Target{Name: fmt.Sprintf("%s backlog after %.0f s, %d clients", b.name, s.DurationS, s.Clients),
			Measured: measured, Target: "< 1 s of work", Met: met(b.b.WorkS != nil && *b.b.WorkS < 1)})
	}
	ts = append(ts, Target{Name: "protected orders / pgbench of its statements",
		Measured: "not measured yet", Target: "≥ 0.7"})
	return ts
}
