package bench

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// Sustained is the sustained phase: N clients checking out on a fresh stack for a while,
// then the background work the load left behind.
type Sustained struct {
	Clients    int     `json:"clients"`
	DurationS  float64 `json:"duration_s"`
	Checkouts  int     `json:"checkouts"`
	Unexpected int     `json:"unexpected"`
	Throughput float64 `json:"throughput_per_s"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	Deliveries Backlog `json:"webhook_deliveries"`
	Jobs       Backlog `json:"jobs"`
	// DrainBoundS is how long the phase waited at most for each backlog to reach zero.
	DrainBoundS float64 `json:"drain_bound_s"`
}

// Backlog is one kind of background work at the end of the load.
type Backlog struct {
	// AtEnd is how many were waiting when the load stopped: the gateway's pending deliveries,
	// or River's available, running and retryable jobs.
	AtEnd int64 `json:"at_end"`
	// MadeDuringLoad is how many the load created, DoneDuringLoad how many of all were
	// finished while it ran; the rates are those per second of load.
	MadeDuringLoad int64   `json:"made_during_load"`
	MadeRatePerS   float64 `json:"made_rate_per_s"`
	DoneDuringLoad int64   `json:"done_during_load"`
	DoneRatePerS   float64 `json:"done_rate_per_s"`
	// BehindS is AtEnd in seconds of load: AtEnd / MadeRatePerS, how far the work lags
	// behind the checkouts that made it.
	BehindS float64 `json:"behind_s"`
	// WorkS is the seconds of work the backlog was: how long it took to reach zero once the
	// load stopped, polled every 100 ms; null if it did not within the bound.
	WorkS *float64 `json:"work_s"`
}

// counter counts rows of one kind of background work.
type counter struct {
	db      *gorm.DB
	pending string // SQL counting the waiting ones
	done    string // SQL counting the finished ones
}

func deliveriesCounter(gw *gorm.DB) counter {
	return counter{db: gw,
		pending: "SELECT count(*) FROM gw_deliveries WHERE status = 'pending'",
		done:    "SELECT count(*) FROM gw_deliveries WHERE status <> 'pending'"}
}

func jobsCounter(shop *gorm.DB) counter {
	return counter{db: shop,
		pending: "SELECT count(*) FROM river_job WHERE state IN ('available', 'running', 'retryable')",
		done:    "SELECT count(*) FROM river_job WHERE state IN ('completed', 'discarded', 'cancelled')"}
}

func (c counter) count(ctx context.Context, query string) int64 {
	var n int64
	if err := c.db.WithContext(ctx).Raw(query).Scan(&n).Error; err != nil {
		return -1
	}
	return n
}

// counts is how many are pending and how many are done.
func (c counter) counts(ctx context.Context) [2]int64 {
	return [2]int64{c.count(ctx, c.pending), c.count(ctx, c.done)}
}

// sustainedPhase runs the load on b for d, then watches both backlogs drain, each for at most
// bound.
func sustainedPhase(ctx context.Context, b *benchStack, clients int, d, bound time.Duration, prog *progress) Sustained {
	deliveries, jobs := deliveriesCounter(b.gwDB), jobsCounter(b.st.DB())
	deliveriesBefore, jobsBefore := deliveries.counts(ctx), jobs.counts(ctx)
	prog.say("sustained: %d clients checking out for %s", clients, d.Round(time.Second))
	l := createLoad(ctx, b, cell{checkoutPath, clients}, d)
	s := Sustained{Clients: clients, DurationS: l.Elapsed.Seconds(), Checkouts: len(l.latencies),
		Unexpected: l.Unexpected, Throughput: l.Throughput(), P50Ms: l.P50(), P99Ms: l.P99(), DrainBoundS: bound.Seconds()}
	s.Deliveries = backlogAtEnd(ctx, deliveries, deliveriesBefore, l.Elapsed)
	s.Jobs = backlogAtEnd(ctx, jobs, jobsBefore, l.Elapsed)
	prog.say("sustained: draining %d deliveries and %d jobs", s.Deliveries.AtEnd, s.Jobs.AtEnd)
	drain(ctx, bound, map[*Backlog]counter{&s.Deliveries: deliveries, &s.Jobs: jobs})
	return s
}

// backlogAtEnd reads c's backlog the moment the load stopped, and what the load made and
// what was done while it ran, from before (pending and done counts at its start).
func backlogAtEnd(ctx context.Context, c counter, before [2]int64, load time.Duration) Backlog {
	b := Backlog{AtEnd: c.count(ctx, c.pending)}
	b.DoneDuringLoad = c.count(ctx, c.done) - before[1]
	b.MadeDuringLoad = b.AtEnd - before[0] + b.DoneDuringLoad
	if load > 0 {
		b.MadeRatePerS = float64(b.MadeDuringLoad) / load.Seconds()
		b.DoneRatePerS = float64(b.DoneDuringLoad) / load.Seconds()
	}
	if b.MadeRatePerS > 0 {
		b.BehindS = float64(b.AtEnd) / b.MadeRatePerS
	}
	return b
}

// drain polls every backlog until it is zero, recording when, for at most bound.
func drain(ctx context.Context, bound time.Duration, backlogs map[*Backlog]counter) {
	began := time.Now()
	for time.Since(began) < bound && ctx.Err() == nil {
		waiting := false
		for b, c := range backlogs {
			if b.WorkS != nil {
				continue
			}
			if n := c.count(ctx, c.pending); n == 0 {
				took := time.Since(began).Seconds()
				b.WorkS = &took
			} else {
				waiting = true
			}
		}
		if !waiting {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
