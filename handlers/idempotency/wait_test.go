package idempotency_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"checkoutlab/handlers"
	"checkoutlab/handlers/idempotency"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// shop is one "process": the real router and the idempotency middleware on a store of its
// own, with one idempotent route, POST /api/v1/op, whose handler the test controls.
type shop struct {
	e    *echo.Echo
	m    *idempotency.Middleware
	runs atomic.Int32 // how many times the handler ran

	mu sync.Mutex
	// op is what the handler does; it answers 201 {"run": n} unless op returns an error.
	op func(ctx context.Context) error
}

// newShop builds a shop on db (seeded with the demo tenants), with a 30 s lease (without an
// estimate, Retry-After would say up to 30), and the held requests' look at their key wired
// as cmd/shop wires it (no key listener: the tests that need one start it).
func newShop(tb testing.TB, db *gorm.DB) *shop {
	tb.Helper()
	e := handlers.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	s := &shop{e: e, op: func(context.Context) error { return nil }}
	s.m = &idempotency.Middleware{Store: models.NewIdempotencyStore(db), Lease: 30 * time.Second,
		Scope:       func(echo.Context) (string, string) { return "acme", "api_key:test" },
		RenderError: handlers.ErrorResponse}
	s.m.Keys, s.m.PollEvery = models.NewIdempotencyStore(db), time.Second
	if models.Dialect(db) == models.SQLite {
		s.m.PollEvery = 25 * time.Millisecond
	}
	decode := func(c echo.Context) (any, idempotency.Fingerprint, error) {
		fp, err := idempotency.FingerprintOf(struct{ Op string }{"op"})
		return nil, fp, err
	}
	e.POST("/api/v1/op", func(c echo.Context) error {
		// The middleware only reads the key; a fresh key is written by the operation's first
		// transaction. This operation has none, so it writes its key first (Claim), as the
		// triage actions do: from then on a duplicate finds the key in progress while op runs.
		if err := idempotency.KeyOf(c).Claim(c.Request().Context()); err != nil {
			return err
		}
		n := s.runs.Add(1)
		s.mu.Lock()
		op := s.op
		s.mu.Unlock()
		if err := op(c.Request().Context()); err != nil {
			return err
		}
		return c.JSON(http.StatusCreated, map[string]any{"run": n})
	}, s.m.Route(decode))
	return s
}

func (s *shop) setOp(op func(ctx context.Context) error) {
	s.mu.Lock()
	s.op = op
	s.mu.Unlock()
}

// answer is a response and when it arrived.
type answer struct {
	*httptest.ResponseRecorder
	sent, at time.Time
}

func (a answer) took() time.Duration { return a.at.Sub(a.sent) }

func (a answer) String() string {
	return fmt.Sprintf("%d %s (Retry-After %q, Preference-Applied %q, replayed %q)", a.Code, strings.TrimSpace(a.Body.String()),
		a.Header().Get("Retry-After"), a.Header().Get(idempotency.HeaderPreferenceApplied), a.Header().Get(idempotency.HeaderReplayed))
}

// post sends POST /api/v1/op under key, with the Prefer header if prefer is not empty.
func (s *shop) post(key, prefer string) answer {
	req := httptest.NewRequest(http.MethodPost, "/api/v1/op", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idempotency.HeaderKey, key)
	if prefer != "" {
		req.Header.Set(idempotency.HeaderPrefer, prefer)
	}
	rec := httptest.NewRecorder()
	sent := time.Now()
	s.e.ServeHTTP(rec, req)
	return answer{ResponseRecorder: rec, sent: sent, at: time.Now()}
}

// blockingOp makes the handler wait until release is closed, and closes started when it
// begins (once).
func blockingOp() (op func(context.Context) error, started <-chan struct{}, release chan struct{}) {
	st, rel := make(chan struct{}), make(chan struct{})
	var once sync.Once
	return func(ctx context.Context) error {
		once.Do(func() { close(st) })
		select {
		case <-rel:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, st, rel
}

// startOwner sends the first request of key in the background, once its handler is running;
// the returned channel gets its answer.
func startOwner(t *testing.T, s *shop, key string, started <-chan struct{}) <-chan answer {
	t.Helper()
	done := make(chan answer, 1)
	go func() { done <- s.post(key, "") }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the owner's handler never started")
	}
	return done
}

func mustStatus(t *testing.T, a answer, status int, code string) {
	t.Helper()
	if a.Code != status {
		t.Fatalf("status: got %s, want %d", a, status)
	}
	if code != "" {
		var body struct{ Error string }
		_ = json.Unmarshal(a.Body.Bytes(), &body)
		if body.Error != code {
			t.Fatalf("error: got %s, want %s", a, code)
		}
	}
}

func mustReplayOf(t *testing.T, replay, first answer) {
	t.Helper()
	if replay.Code != first.Code || replay.Body.String() != first.Body.String() || replay.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("got %s, want the replay of %s", replay, first)
	}
}

// heldFor is how long the test lets a duplicate wait before the owner answers: long enough
// that a duplicate answered at once would have been answered by then.
const heldFor = 300 * time.Millisecond

func TestPreferWait(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)

		t.Run("Replay", func(t *testing.T) {
			s := newShop(t, db)
			op, started, release := blockingOp()
			s.setOp(op)
			owner := startOwner(t, s, "k-replay", started)
			dup := make(chan answer, 1)
			go func() { dup <- s.post("k-replay", "wait=2") }()
			time.Sleep(heldFor)
			close(release)
			first, second := <-owner, <-dup
			mustStatus(t, first, http.StatusCreated, "")
			mustReplayOf(t, second, first)
			if got := second.Header().Get(idempotency.HeaderPreferenceApplied); got != "wait=2" {
				t.Fatalf("Preference-Applied: got %q, want wait=2", got)
			}
			if second.took() < heldFor {
				t.Fatalf("the duplicate was answered after %v, before the owner's answer (%v)", second.took(), heldFor)
			}
			if s.runs.Load() != 1 {
				t.Fatalf("the handler ran %d times, want 1", s.runs.Load())
			}
			t.Logf("the duplicate's replay came %v after the owner's answer", second.at.Sub(first.at))
			if lag := second.at.Sub(first.at); lag > time.Second {
				t.Fatalf("the replay came %v after the owner's answer: it was not woken, it waited out its bound", lag)
			}
		})

		t.Run("ReleasedKeyResumes", func(t *testing.T) {
			s := newShop(t, db)
			op, started, release := blockingOp()
			s.setOp(func(ctx context.Context) error {
				if err := op(ctx); err != nil {
					return err
				}
				if s.runs.Load() == 1 {
					return models.ErrServiceUnavailable // the owner's infrastructure failed: released
				}
				return nil
			})
			owner := startOwner(t, s, "k-release", started)
			dup := make(chan answer, 1)
			go func() { dup <- s.post("k-release", "wait=2") }()
			time.Sleep(heldFor)
			close(release)
			first, second := <-owner, <-dup
			mustStatus(t, first, http.StatusServiceUnavailable, "")
			mustStatus(t, second, http.StatusCreated, "")
			if second.Header().Get(idempotency.HeaderReplayed) != "" || s.runs.Load() != 2 {
				t.Fatalf("got %s after %d runs, want the duplicate to run the released key itself", second, s.runs.Load())
			}
		})

		t.Run("PastTheBound", func(t *testing.T) {
			s := newShop(t, db)
			op, started, release := blockingOp()
			s.setOp(op)
			owner := startOwner(t, s, "k-bound", started)
			// The owner takes 2 s; the duplicate waits 1 s.
			go func() { time.Sleep(2 * time.Second); close(release) }()
			a := s.post("k-bound", "wait=1")
			mustStatus(t, a, http.StatusConflict, "idempotency_request_in_progress")
			if a.took() < time.Second || a.took() > 1900*time.Millisecond {
				t.Fatalf("the 409 came after %v, want the 1 s it asked to wait", a.took())
			}
			if a.Header().Get(idempotency.HeaderPreferenceApplied) != "wait=1" || a.Header().Get("Retry-After") == "" {
				t.Fatalf("got %s, want Preference-Applied: wait=1 and a Retry-After", a)
			}
			mustStatus(t, <-owner, http.StatusCreated, "")
		})

		t.Run("NoPreferIsAnsweredAtOnce", func(t *testing.T) {
			s := newShop(t, db)
			// A history of quick operations: the estimate is about them, not the lease.
			for i := range 5 {
				mustStatus(t, s.post(fmt.Sprintf("k-quick-%d", i), ""), http.StatusCreated, "")
			}
			op, started, release := blockingOp()
			s.setOp(op)
			owner := startOwner(t, s, "k-now", started)
			for _, prefer := range []string{"", "wait=abc", "wait=0", "respond-async", "wait=-3"} {
				a := s.post("k-now", prefer)
				mustStatus(t, a, http.StatusConflict, "idempotency_request_in_progress")
				ra, err := strconv.Atoi(a.Header().Get("Retry-After"))
				if err != nil || ra < 1 || ra > 2 {
					t.Fatalf("Prefer %q: got %s, want Retry-After 1 or 2 s, not the rest of the 30 s lease", prefer, a)
				}
				if a.took() > heldFor || a.Header().Get(idempotency.HeaderPreferenceApplied) != "" {
					t.Fatalf("Prefer %q: got %s after %v, want a 409 at once, no preference applied", prefer, a, a.took())
				}
			}
			close(release)
			mustStatus(t, <-owner, http.StatusCreated, "")
		})

		t.Run("ClientGoesAway", func(t *testing.T) {
			s := newShop(t, db)
			op, started, release := blockingOp()
			s.setOp(op)
			owner := startOwner(t, s, "k-gone", started)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			req := httptest.NewRequest(http.MethodPost, "/api/v1/op", strings.NewReader("{}")).WithContext(ctx)
			req.Header.Set(idempotency.HeaderKey, "k-gone")
			req.Header.Set(idempotency.HeaderPrefer, "wait=5")
			sent := time.Now()
			s.e.ServeHTTP(httptest.NewRecorder(), req)
			if took := time.Since(sent); took > 2*time.Second {
				t.Fatalf("a duplicate whose client left after 200 ms was held %v", took)
			}
			close(release)
			mustStatus(t, <-owner, http.StatusCreated, "")
		})
	})
}

// TestPreferWaitAcrossProcesses holds a duplicate in one "process" (a middleware and a
// connection pool of its own) for an owner in another, on one database: on PostgreSQL the
// waiter marks the key awaited and is woken by NOTIFY (it does not poll); on SQLite it polls
// the key.
func TestPreferWaitAcrossProcesses(t *testing.T) {
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			db1, db2 := mustTwoPools(t, dialect)
			one, two := newShop(t, db1), newShop(t, db2)
			if dialect == models.Postgres {
				ctx, cancel := context.WithCancel(context.Background())
				listening := make(chan struct{})
				var once sync.Once
				l := models.NewKeyListener(db2, two.m.Wake, func() { two.m.WakeAll(); once.Do(func() { close(listening) }) }, nil)
				if l == nil {
					t.Fatal("no listener on PostgreSQL")
				}
				done := make(chan struct{})
				go func() { defer close(done); l.Run(ctx) }()
				t.Cleanup(func() { cancel(); <-done })
				<-listening
				two.m.Keys, two.m.PollEvery = models.NewIdempotencyStore(db2), 0 // no polling
			}

			for _, c := range []struct {
				name    string
				ownerOK bool
			}{{"Replay", true}, {"ReleasedKeyResumes", false}} {
				t.Run(c.name, func(t *testing.T) {
					key := "k-" + c.name
					op, started, release := blockingOp()
					one.setOp(func(ctx context.Context) error {
						if err := op(ctx); err != nil {
							return err
						}
						if !c.ownerOK {
							return models.ErrServiceUnavailable
						}
						return nil
					})
					runsBefore := two.runs.Load()
					owner := startOwner(t, one, key, started)
					dup := make(chan answer, 1)
					go func() { dup <- two.post(key, "wait=5") }()
					time.Sleep(heldFor)
					close(release)
					first, second := <-owner, <-dup
					if c.ownerOK {
						mustStatus(t, first, http.StatusCreated, "")
						mustReplayOf(t, second, first)
					} else {
						mustStatus(t, first, http.StatusServiceUnavailable, "")
						mustStatus(t, second, http.StatusCreated, "")
						if two.runs.Load() != runsBefore+1 {
							t.Fatalf("the waiter's process ran the handler %d times, want once", two.runs.Load()-runsBefore)
						}
					}
					lag := second.at.Sub(first.at)
					t.Logf("the other process's answer came %v after the owner's", lag)
					if lag > 2*time.Second {
						t.Fatalf("the waiter answered %v after the owner: it was not woken, it waited out its 5 s", lag)
					}
				})
			}
		})
	}
}

// mustTwoPools opens one fresh database twice, as two processes would: two connection pools.
func mustTwoPools(t *testing.T, dialect string) (*gorm.DB, *gorm.DB) {
	t.Helper()
	ctx := context.Background()
	url, dir := modelstest.MustDatabaseURL(t, dialect), ""
	if url == "" {
		dir = t.TempDir()
	}
	open := func() *gorm.DB {
		db, err := models.Open(ctx, url, dir, "shop.db")
		if err != nil {
			t.Fatalf("open %s: %v", dialect, err)
		}
		t.Cleanup(func() { models.Close(db) })
		return db
	}
	db1 := open()
	if err := models.Migrate(ctx, db1); err != nil {
		t.Fatal(err)
	}
	modelstest.MustSeed(t, db1)
	return db1, open()
}

// TestPreferWaitTwentyAtOnce sends twenty requests on one key at once, all with
// Prefer: wait=2, against an operation of 50 ms, for ten rounds after one to warm up: one runs,
// nineteen are held and replay its answer. It logs how long after the winner's answer the others had theirs (the issue's
// target: within 50 ms, p99); it asserts only the outcome, never the timing.
func TestPreferWaitTwentyAtOnce(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		s := newShop(t, db)
		s.setOp(func(ctx context.Context) error {
			select {
			case <-time.After(50 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		const rounds, clients = 10, 20
		var lags []time.Duration
		// Round -1 warms up: it also opens the pool's connections, which a running shop has.
		for r := -1; r < rounds; r++ {
			key := fmt.Sprintf("k-twenty-%d", r)
			runsBefore := s.runs.Load()
			answers := make([]answer, clients)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range clients {
				wg.Go(func() { <-start; answers[i] = s.post(key, "wait=2") })
			}
			close(start)
			wg.Wait()
			winner := -1
			for i, a := range answers {
				if a.Code == http.StatusCreated && a.Header().Get(idempotency.HeaderReplayed) == "" {
					if winner >= 0 {
						t.Fatalf("round %d: two requests ran the operation", r)
					}
					winner = i
				}
			}
			if winner < 0 || s.runs.Load() != runsBefore+1 {
				t.Fatalf("round %d: %d runs, want one winner", r, s.runs.Load()-runsBefore)
			}
			for i, a := range answers {
				if i != winner {
					mustReplayOf(t, a, answers[winner])
					if r >= 0 {
						lags = append(lags, max(0, a.at.Sub(answers[winner].at)))
					}
				}
			}
		}
		slices.Sort(lags)
		t.Logf("%d rounds of %d requests on one key with Prefer: wait=2: the others' answers after the winner's: p50 %v, p99 %v, max %v",
			rounds, clients, lags[len(lags)/2], lags[(len(lags)*99+99)/100-1], lags[len(lags)-1])
	})
}
