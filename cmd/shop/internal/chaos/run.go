package chaos

import (
	"bytes"
	"checkoutlab/payments/lab"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"checkoutlab/cmd/shop/internal/labrun"
	"checkoutlab/models"
	"checkoutlab/payments"
)

// Runner runs chaos runs on the failure lab's stacks: the shop's own wiring and
// configuration, and its program as the replicas (labrun.Runner.Exe).
type Runner struct {
	Lab *labrun.Runner
}

// run is one chaos run in progress.
type run struct {
	o       lab.ChaosOptions
	stack   *labrun.ReplicaStack
	control *http.Client
	began   time.Time
	// emails matches the e-mail addresses of the run's customers (SQL LIKE): on a PostgreSQL
	// database that earlier runs used too, the run judges its own orders only.
	emails string

	mu       sync.Mutex
	progress lab.ChaosProgress
	marks    []lab.ChaosMark
	problems []string
	report   func(lab.ChaosProgress)

	replicaMu []sync.Mutex // one restart of a replica at a time
	restarts  sync.WaitGroup
	kills     atomic.Int64
	faults    atomic.Int64
}

// Run makes one chaos run of o on a fresh stack and judges it. report, if set, is called
// with the progress as it changes. log receives the lines a lab stack announces itself with.
// Run's error is a run that could not be made (the stack did not start); a run whose
// invariants broke is a lab.ChaosResult with OK false.
func (r *Runner) Run(ctx context.Context, o lab.ChaosOptions, report func(lab.ChaosProgress), log io.Writer) (*lab.ChaosResult, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	events, purchases := Plan(o)
	lab := *r.Lab
	lab.DatabaseURL, lab.Log = o.DatabaseURL, log
	serverOff := o.Off
	if serverOff == payments.SwitchClientSameKey {
		serverOff = "" // a client habit: the replicas keep every protection
	}
	ru := &run{o: o, report: report, replicaMu: make([]sync.Mutex, o.Replicas),
		control: &http.Client{Timeout: 10 * time.Second}}
	ru.setPhase("starting", len(purchases))
	st, err := lab.StartReplicaStack(ctx, labrun.ReplicaOptions{Replicas: o.Replicas, Off: serverOff,
		// A load balancer that, like some, sends a POST again to the next replica when its
		// replica dies mid-request, with a usual upstream timeout, well above a checkout's (the
		// gateway times out after 1s in a lab stack).
		Proxy: labrun.ProxyOptions{RetryPOST: true, Timeout: 10 * time.Second}})
	if err != nil {
		return nil, fmt.Errorf("start the chaos stack: %w", err)
	}
	defer st.Close()
	ru.stack = st
	if err := restock(ctx, st, len(purchases)); err != nil {
		return nil, err
	}

	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 2 * o.Clients
	defer transport.CloseIdleConnections()
	c := &customer{shop: st.Proxy.URL(), apiKeys: st.APIKeys, runID: models.NewID("chaos"),
		http:    &http.Client{Transport: transport, Timeout: clientTimeout},
		sameKey: o.Off != payments.SwitchClientSameKey}
	ru.emails = "chaos+" + c.runID + "-%"
	ru.began = time.Now()
	c.began = ru.began
	ru.setPhase("purchasing", len(purchases))
	outcomes := ru.purchase(ctx, c, events, purchases)
	ru.restarts.Wait() // every replica is up again before the shop is asked to settle

	ru.setPhase("settling", len(purchases))
	unsettled := ru.settle(ctx)
	ru.setPhase("judging", len(purchases))
	res, err := ru.judge(ctx, outcomes, events)
	if err != nil {
		return nil, err
	}
	res.Unsettled = unsettled
	ru.mu.Lock()
	res.Problems = slices.Clone(ru.problems)
	ru.mu.Unlock()
	res.Took = time.Since(ru.began)
	ru.setPhase("done", len(purchases))
	return res, nil
}

// restock gives every product enough stock for the run: a chaos run is about payments, not
// about selling out.
func restock(ctx context.Context, st *labrun.ReplicaStack, purchases int) error {
	if err := st.DB.WithContext(ctx).Exec("UPDATE products SET stock = ?", 10*purchases+1000).Error; err != nil {
		return fmt.Errorf("restock the chaos stack: %w", err)
	}
	return nil
}

// purchase has o.Clients customers make the purchases, each one started after the events
// scheduled before it were struck.
func (ru *run) purchase(ctx context.Context, c *customer, events []lab.ChaosEvent, purchases []Purchase) []outcome {
	next := make(chan Purchase)
	outcomes := make([]outcome, len(purchases))
	var wg sync.WaitGroup
	for k := range ru.o.Clients {
		rng := rand.New(rand.NewPCG(uint64(ru.o.Seed), uint64(k)))
		wg.Go(func() {
			for p := range next {
				out := c.buy(ctx, p, rng)
				outcomes[p.Index] = out
				ru.finished(out)
			}
		})
	}
	e := 0
	for _, p := range purchases {
		for ; e < len(events) && events[e].Purchase == p.Index; e++ {
			ru.strike(ctx, events[e])
		}
		select {
		case next <- p:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	return outcomes
}

func (ru *run) finished(o outcome) {
	ru.mu.Lock()
	ru.progress.Done++
	if o.Outcome == lab.ChaosOutcomeGaveUp {
		ru.progress.GaveUp++
	} else {
		ru.progress.Answered++
	}
	p := ru.progress
	ru.mu.Unlock()
	if ru.report != nil {
		ru.report(p)
	}
}

func (ru *run) setPhase(phase string, total int) {
	ru.mu.Lock()
	ru.progress.Phase, ru.progress.Total = phase, total
	ru.progress.Kills, ru.progress.Faults = int(ru.kills.Load()), int(ru.faults.Load())
	p := ru.progress
	ru.mu.Unlock()
	if ru.report != nil {
		ru.report(p)
	}
}

func (ru *run) mark(kind, label string, replica int) {
	ru.mu.Lock()
	ru.marks = append(ru.marks, lab.ChaosMark{AtMS: time.Since(ru.began).Milliseconds(), Kind: kind, Label: label, Replica: replica})
	ru.progress.Kills, ru.progress.Faults = int(ru.kills.Load()), int(ru.faults.Load())
	p := ru.progress
	ru.mu.Unlock()
	if ru.report != nil {
		ru.report(p)
	}
}

// strike does what event e schedules. A kill and a crash point happen in the background:
// the purchases go on while a replica is down, as they would in production.
func (ru *run) strike(ctx context.Context, e lab.ChaosEvent) {
	switch e.Action {
	case lab.ChaosActionFault:
		f := map[string]any{"fault": e.Fault}
		if e.DelayMS > 0 {
			f["delay_ms"] = e.DelayMS
		}
		if e.Times > 0 {
			f["times"] = e.Times
		}
		if e.Copies > 0 {
			f["copies"] = e.Copies
		}
		if err := ru.controlPost(ctx, "/_control/faults", f); err != nil {
			ru.problem("arm %s: %v", e.Fault, err)
			return
		}
		ru.faults.Add(1)
		ru.mark("fault", e.Fault, 0)
	case lab.ChaosActionKill, lab.ChaosActionCrashPoint:
		i := e.Replica - 1
		if !ru.replicaMu[i].TryLock() {
			return // that replica is still coming back from the last strike
		}
		ru.restarts.Go(func() {
			defer ru.replicaMu[i].Unlock()
			ru.killAndRestart(ctx, i, e.CrashAt)
		})
	}
}

// killAndRestart kills replica i and starts it again, with crashAt as its crash point if set;
// such a replica dies by itself at that point (or is killed after a while if no checkout
// reaches it there) and comes back without one.
func (ru *run) killAndRestart(ctx context.Context, i int, crashAt string) {
	c := ru.stack.Replicas[i]
	if _, err := c.Kill(); err != nil {
		ru.problem("kill replica %d: %v", i+1, err)
		return
	}
	ru.kills.Add(1)
	ru.mark("kill", "SIGKILL", i+1)
	err := c.StartAgain(ctx, crashAt)
	if crashAt == "" {
		if err != nil {
			ru.problem("restart replica %d: %v", i+1, err)
		}
		return
	}
	// With a crash point the replica may die before it has even answered /healthz: the
	// checkouts that waited in its listener's queue reach it at once. Either way, wait for it
	// to die there.
	select {
	case <-c.Done():
		ru.kills.Add(1)
		ru.mark("crash", crashAt, i+1)
	case <-time.After(10 * time.Second):
		_, _ = c.Kill() // no checkout reached the crash point on this replica
	case <-ctx.Done():
		return
	}
	if err := c.StartAgain(ctx, ""); err != nil {
		ru.problem("restart replica %d: %v", i+1, err)
	}
}

// problem notes something the lab failed to do to the stack; the result lists it.
func (ru *run) problem(format string, args ...any) {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	ru.problems = append(ru.problems, fmt.Sprintf(format, args...))
}

// controlPost POSTs v to the gateway's control API, with its control token.
func (ru *run) controlPost(ctx context.Context, path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ru.stack.Gateway.URL()+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return ru.controlDo(req, nil)
}

// controlGet GETs path of the gateway's control API into v.
func (ru *run) controlGet(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ru.stack.Gateway.URL()+path, nil)
	if err != nil {
		return err
	}
	return ru.controlDo(req, v)
}

func (ru *run) controlDo(req *http.Request, v any) error {
	// The gateway's control API is an operator's tool: it wants the stack's control token.
	req.Header.Set("Authorization", "Bearer "+ru.stack.ControlToken)
	res, err := ru.control.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, res.StatusCode, body)
	}
	if v == nil {
		return nil
	}
	return json.NewDecoder(res.Body).Decode(v)
}

// RunChaos is a run for the /lab/chaos pages (handlers.ChaosRunner): always on a fresh
// embedded SQLite database, whatever database the shop uses, so that a run never touches the
// shop's own data.
func (r *Runner) RunChaos(ctx context.Context, o lab.ChaosOptions, report func(lab.ChaosProgress)) (*lab.ChaosResult, error) {
	o.DatabaseURL = ""
	return r.Run(ctx, o, report, nil)
}
