package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"checkoutlab/models"
	"checkoutlab/payments"
)

// Result is everything one run measured: the JSON of --json, and what the text report shows.
// docs/benchmarks.md describes each field.
type Result struct {
	Machine   Machine       `json:"machine"`
	Settings  Settings      `json:"settings"`
	Creation  []CreationRow `json:"creation"`
	Replay    []ReplayRow   `json:"replay"`
	SameKey   []SameKeyRow  `json:"same_key"`
	Phases    PhaseTiming   `json:"phase_timing"`
	Counters  *Counters     `json:"db_counters"` // null on SQLite
	Sustained Sustained     `json:"sustained"`
	Memory    Memory        `json:"memory"`
	Targets   []Target      `json:"targets"`
	// Errors are the phases that could not be measured, with why; the others still are.
	Errors []string `json:"errors"`
	TookS  float64  `json:"took_s"`
}

// Machine is where and when the run happened.
type Machine struct {
	CPUs            int       `json:"cpus"`
	GoVersion       string    `json:"go_version"`
	OS              string    `json:"os_arch"`
	Dialect         string    `json:"dialect"`
	DatabaseVersion string    `json:"database_version,omitempty"`
	LoadStart       []float64 `json:"loadavg_start"`
	LoadEnd         []float64 `json:"loadavg_end"`
	StartedAt       time.Time `json:"started_at"`
}

// Settings are the run's flags and how its budget was divided.
type Settings struct {
	DurationS  float64 `json:"duration_s"`
	Clients    int     `json:"clients"`
	Rounds     int     `json:"rounds"`
	CellS      float64 `json:"measurement_s"` // one variant of one kind of request in one round
	SustainedS float64 `json:"sustained_s"`
}

// PhaseTiming is the time per span name in a window of checkouts with tracing on.
type PhaseTiming struct {
	WindowS   float64    `json:"window_s"`
	Checkouts int        `json:"checkouts"`
	Spans     []SpanStat `json:"spans"` // empty: no spans recorded
}

// plan divides a run's budget among its phases.
type plan struct {
	clientCounts []int
	rounds       int
	cell         time.Duration // one measurement of the rounds
	sameKeyBound time.Duration // one same-key step at most
	spanWindow   time.Duration
	counted      time.Duration // the checkouts of a counted window (PostgreSQL)
	sustained    time.Duration
	drainBound   time.Duration
}

// makePlan gives the sustained phase a quarter of d (60 s of the default 4 min), the rounds
// about two fifths, and the short phases what they need, bounded for short runs.
func makePlan(d time.Duration, clients int) *plan {
	p := &plan{clientCounts: []int{1}, rounds: 5}
	if clients > 1 {
		p.clientCounts = append(p.clientCounts, clients)
	}
	measurements := 3 * 2 * len(p.clientCounts) // (protected, unprotected, replay) × endpoints × clients
	roundsBudget := d * 2 / 5
	if roundsBudget/time.Duration(p.rounds*measurements) < 300*time.Millisecond {
		p.rounds = 3 // a short run: fewer, shorter rounds
	}
	p.cell = max(roundsBudget/time.Duration(p.rounds*measurements), 100*time.Millisecond)
	p.sameKeyBound = min(max(d/6, 2*time.Second), 40*time.Second)
	p.spanWindow = min(max(d/40, 300*time.Millisecond), 5*time.Second)
	p.counted = min(max(d/24, time.Second), 10*time.Second)
	p.sustained = d / 4
	p.drainBound = min(max(d/4, 5*time.Second), 2*time.Minute)
	return p
}

// Run measures every phase and returns the figures. A phase that fails is named in
// Result.Errors; a stack that cannot start ends the run.
func (r *Runner) Run(ctx context.Context, o Options) (*Result, error) {
	began := time.Now()
	p := makePlan(o.Duration, o.Clients)
	prog := newProgress(r.stderr(), o.Duration)
	defer prog.done()
	defer r.closeAdmin() // after every stack's database is dropped
	res := &Result{
		Machine: Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH,
			Dialect: models.SQLite, LoadStart: loadAverage(), StartedAt: began.UTC()},
		Settings: Settings{DurationS: o.Duration.Seconds(), Clients: o.Clients, Rounds: p.rounds, CellS: p.cell.Seconds(),
			SustainedS: p.sustained.Seconds()},
	}
	if r.DatabaseURL != "" {
		res.Machine.Dialect = models.Postgres
	}
	// Before any stack starts: the shop's tracers come from the global provider.
	tr := installTracing()
	defer tr.uninstall()

	if err := r.comparePhases(ctx, p, o, prog, tr, res); err != nil {
		return nil, err
	}
	if err := r.sustainedPhases(ctx, p, o, prog, res); err != nil {
		return nil, err
	}
	res.Targets = targets(res, o.Clients)
	res.Machine.LoadEnd = loadAverage()
	res.TookS = time.Since(began).Seconds()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return res, nil
}

// comparePhases runs, on a protected and an unprotected stack side by side, the rounds,
// the same-key steps, the phase timing window and (PostgreSQL) the counted windows.
func (r *Runner) comparePhases(ctx context.Context, p *plan, o Options, prog *progress, tr *tracing, res *Result) error {
	prog.say("starting the protected and the unprotected stacks (%s)", res.Machine.Dialect)
	prot, err := r.startStack(ctx, "protected", payments.Protections{}, o.Clients)
	if err != nil {
		return err
	}
	defer prot.close()
	// The true baseline: with server_idempotency off, the shop neither reads nor writes a key.
	unprot, err := r.startStack(ctx, "unprotected", payments.Protections{Off: payments.SwitchServerIdempotency}, o.Clients)
	if err != nil {
		return err
	}
	defer unprot.close()
	if res.Machine.Dialect == models.Postgres {
		_ = prot.st.DB().WithContext(ctx).Raw("SHOW server_version").Scan(&res.Machine.DatabaseVersion).Error
	}
	prog.say("warming up")
	prot.warmUp(ctx, o.Clients)
	unprot.warmUp(ctx, o.Clients)

	res.Creation, res.Replay = r.creationRounds(ctx, p, prog, prot, unprot)

	for _, prefer := range []string{"", "wait=2"} {
		prog.say("twenty requests on one key (Prefer: %q), at most %s", prefer, p.sameKeyBound)
		res.SameKey = append(res.SameKey, sameKeyStep(ctx, prot, prefer, p.sameKeyBound))
	}

	prog.say("phase timing: %s of checkouts with tracing on", p.spanWindow)
	res.Phases = phaseTiming(ctx, prot, o.Clients, p.spanWindow, tr)

	if res.Machine.Dialect == models.Postgres {
		prog.say("database counters: counted windows of checkouts (waits for pg_stat to flush)")
		// Both windows at once: they count rows and commits, not time, each in its own
		// database, and most of a window is waiting for the counters to be flushed.
		var c Counters
		var errs [2]error
		var wg sync.WaitGroup
		wg.Go(func() { c.Protected, errs[0] = r.counterWindow(ctx, prot, o.Clients, p.counted, p.drainBound) })
		wg.Go(func() { c.Unprotected, errs[1] = r.counterWindow(ctx, unprot, o.Clients, p.counted, p.drainBound) })
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			res.Errors = append(res.Errors, "database counters: "+err.Error())
		}
		res.Counters = &c
	}
	return nil
}

// phaseTiming switches tracing on for a window of checkouts at clients and aggregates the
// spans by name. Spans still open when the window closes end soon after; the short wait lets
// them in.
func phaseTiming(ctx context.Context, b *benchStack, clients int, window time.Duration, tr *tracing) PhaseTiming {
	tr.spans.reset()
	tr.sampler.on.Store(true)
	l := createLoad(ctx, b, cell{checkoutPath, clients}, window)
	tr.sampler.on.Store(false)
	sleep(ctx, 200*time.Millisecond)
	return PhaseTiming{WindowS: l.Elapsed.Seconds(), Checkouts: len(l.latencies), Spans: tr.spans.stats()}
}

// sustainedPhases runs the sustained phase on a stack of its own, started once the compared
// stacks are closed: its backlog is its own load's, and the memory is one stack's.
func (r *Runner) sustainedPhases(ctx context.Context, p *plan, o Options, prog *progress, res *Result) error {
	prog.say("starting the sustained phase's stack")
	runtime.GC()
	debug.FreeOSMemory()
	b, err := r.startStack(ctx, "sustained", payments.Protections{}, o.Clients)
	if err != nil {
		return fmt.Errorf("sustained phase: %w", err)
	}
	defer b.close()
	b.warmUp(ctx, o.Clients)
	sleep(ctx, 300*time.Millisecond) // the warm-up's webhooks and jobs
	res.Memory.IdleRSSMiB, _ = memoryStatus()
	rss := sampleRSS(250 * time.Millisecond)
	res.Sustained = sustainedPhase(ctx, b, o.Clients, p.sustained, p.drainBound, prog)
	res.Memory.LoadRSSMiB = rss.Stop()
	_, res.Memory.PeakMiB = memoryStatus()
	return nil
}
