package idempotency

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
)

// A request that finds its key in progress is answered 409 at once, with a Retry-After that
// estimates when the answer will exist (estimate.go). A client may instead ask to be held for
// the owner's answer with "Prefer: wait=N" (RFC 7240): the request then waits up to
// min(N, MaxWait) seconds and, as soon as the owner has settled the key, reserves again —
// which finds the stored answer (a replay), or a key the owner released (the request resumes
// the operation, as any retry would). Past the bound it gets the ordinary 409.
//
// A held request holds no database connection and no transaction while it waits. It learns
// that the owner is done from:
//
//   - the owner's middleware in this process, which wakes it after its disposition (stored,
//     forgotten or released) has committed (Middleware.settled);
//   - on PostgreSQL, a models.KeyListener, which wakes it for owners in other processes
//     (Middleware.Wake, from pg_notify). The held request first marks the key awaited
//     (Keys.AwaitKey): owners announce only the keys somebody waits for;
//   - every PollEvery, a look at the key (Keys.KeySettled): on SQLite, the only way to hear of
//     an owner in another process; on PostgreSQL, a slow safety net for what a notification
//     cannot carry (a key forgotten in another process, a listener that was reconnecting).

// MaxWait bounds Prefer: wait. Longer, and a slow operation would pin a goroutine and a
// connection of every duplicate for as long as it runs.
const MaxWait = 5 * time.Second

// Header names of RFC 7240.
const (
	HeaderPrefer            = "Prefer"
	HeaderPreferenceApplied = "Preference-Applied"
)

// KeyState is what a held request asks of the key store besides Reserve.
// *models.IdempotencyStore is one.
type KeyState interface {
	// AwaitKey asks the key's owner, in whichever process, to announce when it is done.
	AwaitKey(ctx context.Context, tenantID, key string) error
	// KeySettled reports whether the key may be settled: completed, released, forgotten or
	// abandoned for a whole lease.
	KeySettled(ctx context.Context, tenantID, key string, lease time.Duration) (bool, error)
}

// preferredWait returns the wait a request prefers (Prefer: wait=N, in seconds), at most
// MaxWait. ok is false without one, with wait=0, or with a value that is not a number of
// seconds: RFC 7240 says to ignore a preference the server does not understand, so it is never
// an error. Only the first wait preference counts (RFC 7240, section 2).
func preferredWait(h http.Header) (wait time.Duration, ok bool) {
	for _, line := range h.Values(HeaderPrefer) {
		for _, pref := range strings.Split(line, ",") {
			pref, _, _ = strings.Cut(pref, ";") // parameters (";a=b") do not matter for wait
			name, value, _ := strings.Cut(pref, "=")
			if !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			value = strings.Trim(strings.TrimSpace(value), `"`)
			n, err := strconv.Atoi(value)
			if err != nil || n <= 0 || value[0] == '+' {
				return 0, false
			}
			return time.Duration(min(n, int(MaxWait/time.Second))) * time.Second, true
		}
	}
	return 0, false
}

// holdForOwner is called when the first reservation found the key in progress (res). If the
// request prefers to wait, it holds the request until the owner has settled the key, then
// reserves again and returns that reservation: a replay, a key to resume, or — past the bound,
// or if the client went away — still InProgress, for the 409. Without Prefer: wait it returns
// res as it is.
func (m *Middleware) holdForOwner(c echo.Context, rr models.ReserveRequest, res *models.Reservation) (*models.Reservation, error) {
	wait, ok := preferredWait(c.Request().Header)
	if !ok {
		return res, nil
	}
	c.Response().Header().Set(HeaderPreferenceApplied, "wait="+strconv.Itoa(int(wait/time.Second)))
	ctx := c.Request().Context()
	bound := time.NewTimer(wait)
	defer bound.Stop()
	var poll <-chan time.Time
	if m.Keys != nil {
		// If this fails, the request still hears of an owner in this process, and polls.
		_ = m.Keys.AwaitKey(ctx, rr.TenantID, rr.Key)
		if m.PollEvery > 0 {
			t := time.NewTicker(m.PollEvery)
			defer t.Stop()
			poll = t.C
		}
	}
	for {
		// Watch first, then look: an owner that settles between the look and the watch would
		// otherwise never wake us.
		woken, unwatch := m.signals.watch(rr.TenantID, rr.Key)
		var err error
		res, err = m.Store.Reserve(ctx, rr)
		if err != nil || res.Outcome != models.InProgress {
			unwatch()
			return res, err
		}
		settled := m.waitForOwner(ctx, rr, woken, bound.C, poll)
		unwatch()
		if !settled {
			if ctx.Err() != nil {
				return res, nil // the client went away: nobody reads the 409
			}
			// The bound has passed: one last look, so an answer that came just now is not
			// missed, then the 409.
			return m.Store.Reserve(ctx, rr)
		}
		// Settled: go round and reserve again. If another request took over a released
		// key first, the key is in progress again and we wait for that owner, within the
		// same bound.
	}
}

// waitForOwner blocks until the key may be settled (true) — a signal, or a poll that says so
// — or until the bound passes or the client goes away (false).
func (m *Middleware) waitForOwner(ctx context.Context, rr models.ReserveRequest, woken <-chan struct{}, bound, poll <-chan time.Time) bool {
	for {
		select {
		case <-woken:
			return true
		case <-bound:
			return false
		case <-ctx.Done():
			return false
		case <-poll:
			if settled, err := m.Keys.KeySettled(ctx, rr.TenantID, rr.Key, m.Lease); err == nil && settled {
				return true
			}
		}
	}
}

// settled runs when an owner's disposition (stored, forgotten or released) has committed: it
// records how long the operation took, for Retry-After, and wakes the requests this process
// holds for the key. runOwned defers it.
func (m *Middleware) settled(c echo.Context, j keyJournal, key models.OwnedKey, started time.Time) {
	if key.Completed() {
		m.durations.record(c.Request().Method+" "+c.Path(), time.Since(started))
	}
	m.Wake(j.tenant, j.key)
}

// Wake wakes the requests of this process held for tenantID's key: they look at it again. The
// middleware calls it for its own owners; wire a models.KeyListener to it for the owners of
// other processes.
func (m *Middleware) Wake(tenantID, key string) { m.signals.signal(tenantID, key) }

// WakeAll wakes every held request, to look at its key again: for a listener that may have
// missed announcements while it was reconnecting.
func (m *Middleware) WakeAll() { m.signals.signalAll() }

// signals is one channel per (tenant, key) that requests are held for, closed to wake them all
// at once. The zero value is ready to use.
type signals struct {
	mu       sync.Mutex
	channels map[signalKey]*watchers
}

type signalKey struct{ tenant, key string }

// watchers is the channel of one key and how many held requests watch it.
type watchers struct {
	c chan struct{}
	n int
}

// watch returns a channel that is closed when the key is signalled, and the function to call
// when the caller stops watching.
func (s *signals) watch(tenant, key string) (<-chan struct{}, func()) {
	k := signalKey{tenant, key}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.channels == nil {
		s.channels = map[signalKey]*watchers{}
	}
	w := s.channels[k]
	if w == nil {
		w = &watchers{c: make(chan struct{})}
		s.channels[k] = w
	}
	w.n++
	return w.c, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		// The last watcher of a channel nobody signalled removes it, so the map holds only the
		// keys that requests are held for right now.
		if w.n--; w.n == 0 && s.channels[k] == w {
			delete(s.channels, k)
		}
	}
}

// signal wakes the watchers of the key; a later watch gets a fresh channel.
func (s *signals) signal(tenant, key string) {
	k := signalKey{tenant, key}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.channels[k]; w != nil {
		close(w.c)
		delete(s.channels, k)
	}
}

// signalAll wakes every watcher.
func (s *signals) signalAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, w := range s.channels {
		close(w.c)
		delete(s.channels, k)
	}
}
