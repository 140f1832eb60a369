// Package labrun is the failure lab's runner: `shop lab list`, `shop lab run` and the
// scenarios of the /lab pages.
//
// A run starts a fresh stack (package stack, with the shop's own wiring) with every
// protection on, or with the scenario's one protection off, plays the scenario's steps over
// HTTP (client.go), lets background work settle and checks the invariants through the
// gateway's ledger and the shop's own views, over HTTP (judge.go). A crash scenario runs its
// shop as a child process that really dies (child.go). With --shop, the protected runs go to
// a shop that is already running instead.
//
// The scenarios themselves — steps, invariants, verdicts — are data, in payments/lab.
package labrun

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"

	"gorm.io/gorm"

	"checkoutlab/cmd/shop/internal/stack"
	"checkoutlab/models"
	"checkoutlab/payments"
	"checkoutlab/payments/lab"
)

// Runner runs the failure lab's scenarios. Its zero value is not usable: Wire and Config are
// the shop's own, given by cmd/shop.
type Runner struct {
	// Wire is the shop's wiring: every stack the lab starts is the real shop.
	Wire stack.Wire
	// Config loads a stack's configuration from an environment, as `shop serve` does.
	Config func(getenv func(string) string) (stack.Config, error)
	// Exe is the shop program a crash scenario runs as its child process; "" is this program
	// (os.Executable()), which under `go run ./cmd/shop` is the shop that go run built.
	// Tests build cmd/shop and give its path.
	Exe string
	// DatabaseURL is the PostgreSQL database of the runs of RunScenario; "" gives each run a
	// fresh embedded SQLite database in a temporary directory.
	DatabaseURL string
	// Log receives the lines in which a lab stack announces itself (a protection is off, a
	// crash point is reached); nil discards them.
	Log io.Writer
	// Getenv is the environment `lab run --shop` reads the running shop's settings from (its
	// API keys, leases and timeouts); nil is os.Getenv.
	Getenv func(string) string
	// Seed makes a run's idempotency keys and customer (lab run --seed); 0 picks one per run.
	// A run records its seed, so that it can be run again with the same keys.
	Seed int64
	// Chaos is `shop lab chaos` (package chaos, which builds on this one), nil if not wired.
	Chaos func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// labEnv is the environment of a lab stack: free ports, short timeouts (as in the tests), so
// that a failure resolves in seconds. Everything else is production's default.
var labEnv = map[string]string{
	"SHOP_ADDR":          "127.0.0.1:0",
	"GATEWAY_ADDR":       "127.0.0.1:0",
	"GATEWAY_TIMEOUT":    "1s",
	"IDEMPOTENCY_LEASE":  "2s",
	"COMPLETER_INTERVAL": "200ms",
	"JOB_RESCUE_AFTER":   "4s", // a receipt job taken by a killed shop runs again soon
	"LOG_LEVEL":          "warn",
	// A lab stack serves a handful of requests at a time, and several run at once (chaos runs
	// three replicas) against one PostgreSQL server, whose default is 100 connections.
	"DB_POOL_SIZE": "8",
}

// Scenarios lists the catalogue (handlers.LabRunner).
func (r *Runner) Scenarios() []lab.Scenario { return lab.Scenarios }

// Run runs the scenario called name once in mode, for the /lab pages (handlers.LabRunner):
// always on a fresh embedded SQLite database, whatever database the shop uses, so that a run
// never touches the shop's own data.
func (r *Runner) Run(ctx context.Context, name string, mode lab.Mode) (lab.Result, error) {
	s, ok := lab.Find(name)
	if !ok {
		return lab.Result{}, models.Errorf(models.KindNotFound, models.ErrNotFound.Code, "no lab scenario %q", name)
	}
	sqlite := *r
	sqlite.DatabaseURL = ""
	return sqlite.RunScenario(ctx, s, mode), nil
}

// RunScenario runs s once in mode on a fresh stack and judges it.
func (r *Runner) RunScenario(ctx context.Context, s lab.Scenario, mode lab.Mode) lab.Result {
	began := time.Now()
	res := lab.Result{Scenario: s.Name, Mode: mode, Database: models.SQLite, Seed: r.seed(), StartedAt: began.UTC(),
		Settings: maps.Clone(labEnv)}
	if r.DatabaseURL != "" {
		res.Database = models.Postgres
	}
	var p payments.Protections
	sameKey := true
	if mode == lab.Unprotected {
		res.Off = s.Switch
		if s.Switch == payments.SwitchClientSameKey {
			sameKey = false // a client behaviour: the server keeps every protection
		} else {
			p.Off = s.Switch
		}
	}
	start := func() (*target, error) { return r.startStack(ctx, p) }
	if s.CrashAt != "" {
		start = func() (*target, error) { return r.startCrashTarget(ctx, p, s.CrashAt) }
	}
	if s.Replicas != nil {
		start = func() (*target, error) { return r.startReplicaTarget(ctx, p, s) }
	}
	t, err := start()
	if err != nil {
		res.Err = err.Error()
	} else {
		defer t.close()
		playAndJudge(ctx, s, t, sameKey, &res)
	}
	res.Took = time.Since(began)
	judge(s, &res)
	return res
}

// judge gives res its verdict, its outcome in money and its timeline of messages.
func judge(s lab.Scenario, res *lab.Result) {
	lab.Judge(s, res)
	if res.Err == "" {
		lab.Assess(res, s.PaidOrders)
	}
	res.Events, res.Messages = Timeline(*res, s.PaidOrders)
}

// seed is the seed of a run: r.Seed, or a new one.
func (r *Runner) seed() int64 {
	if r.Seed != 0 {
		return r.Seed
	}
	return rand.Int64N(1<<53) + 1 // a JSON number stays exact below 2^53
}

// runOnShop runs s with every protection on against a shop that is already running
// (`lab run --shop URL`): a production shop has no switches, so there is no unprotected run.
func runOnShop(ctx context.Context, s lab.Scenario, t *target) lab.Result {
	began := time.Now()
	res := lab.Result{Scenario: s.Name, Mode: lab.Protected, Shop: t.shop, Seed: rand.Int64N(1<<53) + 1, StartedAt: began.UTC()}
	playAndJudge(ctx, s, t, true, &res)
	// Leave no armed fault behind for the shop's real traffic.
	if req, err := http.NewRequestWithContext(ctx, http.MethodDelete, t.gateway+"/_control/faults", nil); err == nil {
		req.Header.Set("Authorization", "Bearer "+t.controlToken)
		if resp, err := t.http.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	res.Took = time.Since(began)
	judge(s, &res)
	return res
}

// playAndJudge plays s's steps against t with a fresh client, lets background work settle
// and fills res's invariants and timeline.
func playAndJudge(ctx context.Context, s lab.Scenario, t *target, sameKey bool, res *lab.Result) {
	c := newClient(t, sameKey, res.Seed)
	since := time.Now().UTC().Add(-time.Millisecond)
	err := func() error {
		for _, step := range s.Steps {
			if err := c.play(ctx, t, step); err != nil {
				return err
			}
		}
		res.Unsettled = t.settle(ctx, since, c.email())
		return t.evaluate(ctx, s, since, c, res)
	}()
	if err != nil {
		res.Err = err.Error()
	}
}

// target is what a run plays against: a shop with its gateway — a lab stack started for the
// run, or a shop that was already running (--shop).
type target struct {
	shop, gateway string
	apiKeys       map[string]string
	controlToken  string // of the gateway's control API
	// db is the lab stack's database, for the one thing the lab does behind the shop's back:
	// running the reaper early (ExpireKeys). nil for a running shop.
	db *gorm.DB
	// http is the lab's own HTTP client. Its idle connections are closed before the stack
	// stops: a connection dialled but never used would hold the shop's shutdown for 5s.
	http *http.Client
	// restart waits for a crashed shop to have died and starts it again; it returns when the
	// shop died (crash scenarios only).
	restart func(context.Context) (time.Time, error)
	crashAt string
	// keepsNoKeys: the shop runs with server_idempotency off, so there is no key to reap.
	keepsNoKeys bool
	// settleWithin bounds the wait for background work after the steps: a lab stack's
	// leases and intervals are short, a running shop's are production's (a 30s lease).
	settleWithin time.Duration
	close        func()
}

// newHTTPClient is the lab's client for one stack, with a transport of its own so that the
// stack's idle connections can be closed with it.
func newHTTPClient() (*http.Client, func()) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 32 // a scenario's concurrent copies each keep theirs
	return &http.Client{Transport: transport, Timeout: 30 * time.Second}, transport.CloseIdleConnections
}

// labConfig is the configuration of a lab stack in dir: the lab's environment, the runner's
// database, then extra.
func (r *Runner) labConfig(dir string, extra map[string]string) (map[string]string, stack.Config, error) {
	env := map[string]string{"DATA_DIR": dir, "DATABASE_URL": r.DatabaseURL}
	maps.Copy(env, labEnv)
	maps.Copy(env, extra)
	cfg, err := r.Config(func(k string) string { return env[k] })
	cfg.Lab = r
	return env, cfg, err
}

// startStack starts a whole stack in this process, with protections p.
func (r *Runner) startStack(ctx context.Context, p payments.Protections) (*target, error) {
	dir, err := os.MkdirTemp("", "checkoutlab-lab-")
	if err != nil {
		return nil, err
	}
	_, cfg, err := r.labConfig(dir, nil)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cfg.Protections = p
	cfg.LogOutput = &output{log: r.Log}
	st, err := stack.Start(ctx, cfg, r.Wire)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	client, closeIdle := newHTTPClient()
	return &target{shop: st.URL(), gateway: st.GatewayURL(), apiKeys: cfg.APIKeys, controlToken: cfg.GatewayControlToken,
		db: st.DB(), http: client, settleWithin: 10 * time.Second, keepsNoKeys: !p.On(payments.SwitchServerIdempotency),
		close: func() {
			closeIdle()
			st.Close()
			os.RemoveAll(dir)
		}}, nil
}

// runningShop is the target of `lab run --shop URL`: a shop someone started, with its
// gateway. The API keys are the shop's own setting, SHOP_API_KEYS (the demo keys unless set).
func (r *Runner) runningShop(shopURL, gatewayURL string) (*target, error) {
	getenv := r.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg, err := r.Config(getenv)
	if err != nil {
		return nil, err
	}
	t := &target{shop: strings.TrimRight(shopURL, "/"), gateway: strings.TrimRight(gatewayURL, "/"),
		apiKeys: cfg.APIKeys, controlToken: cfg.GatewayControlToken, http: &http.Client{Timeout: 30 * time.Second},
		// Production leases and intervals: the completer may take a lease and more to step in.
		settleWithin: 2*cfg.IdempotencyLease + cfg.CompleterInterval + 2*cfg.GatewayTimeout,
		close:        func() {}}
	var ignored any
	if err := getJSON(context.Background(), t.http, t.shop+"/healthz", "", &ignored); err != nil {
		return nil, fmt.Errorf("lab: is the shop running? %w", err)
	}
	if err := getJSON(context.Background(), t.http, t.gateway+"/_control/faults", t.controlToken, &ignored); err != nil {
		return nil, fmt.Errorf("lab: is the gateway running, and is GATEWAY_CONTROL_TOKEN its token? %w", err)
	}
	return t, nil
}

// needsLabStack says why s cannot run against a running shop, or "" if it can: a crash point
// and an early reaper run need a shop the lab started itself.
func needsLabStack(s lab.Scenario) string {
	if s.Replicas != nil {
		return "it runs its own replicas behind a load balancer"
	}
	if s.CrashAt != "" {
		return "it kills the shop at a crash point"
	}
	for _, step := range s.Steps {
		if step.ExpireKeys {
			return "it runs the reaper early, behind the shop's back"
		}
	}
	return ""
}
