package idempotency

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
)

// MaxKeyLength is the longest key accepted, as at Stripe.
const MaxKeyLength = 255

// Header names: the client's key, and the mark of a replayed answer.
const (
	HeaderKey      = "Idempotency-Key"
	HeaderReplayed = "Idempotent-Replayed"
)

// Context keys of what the middleware leaves for the handler.
const (
	ctxKey     = "idempotency_key"
	ctxRequest = "idempotency_request"
)

// Store reserves keys. *models.IdempotencyStore is the real one; the failure lab wires a stack
// with a variant of it (payments.Protections.Reserver).
type Store interface {
	Reserve(ctx context.Context, req models.ReserveRequest) (*models.Reservation, error)
}

// Scope names whose keys a request uses: its tenant and, within the tenant, its principal (an
// API key, a browser session). Empty values mean the request is not authenticated.
type Scope func(c echo.Context) (tenantID, principal string)

// Decoder reads an endpoint's request once, before anything is reserved: it returns what the
// handler will work with (RequestOf) and the request's Fingerprint. An error is the answer
// (400 invalid_json, invalid_request, …), and no key is reserved.
type Decoder func(c echo.Context) (req any, fp Fingerprint, err error)

// Journal is where the middleware records each reservation's answer and each disposition.
// *models.JournalStore is one.
type Journal interface {
	Record(ctx context.Context, ev models.JournalEvent)
}

// Middleware runs requests under their idempotency keys. Build one per shop and mount it on
// every idempotent route with Route (or call Run from a handler that shows the answer its own
// way, as the storefront does).
type Middleware struct {
	Store Store
	// Lease is how long an owner may go silent before a retry takes its key over
	// (IDEMPOTENCY_LEASE); the same for every request of a deployment.
	Lease time.Duration
	Scope Scope
	// RenderError turns a handler's error into the response the API would send for it, so an
	// error that is a business outcome (409 out_of_stock) can be stored and replayed.
	RenderError func(err error) models.Response
	Metrics     *Metrics // optional
	Journal     Journal  // optional
	// Keys, if set, is how a request held by Prefer: wait reaches an owner in another process
	// (wait.go): it marks the key awaited, so that the owner announces it (PostgreSQL), and
	// looks at the key every PollEvery: often on SQLite, which cannot announce, rarely on
	// PostgreSQL, as a safety net. Without it, only owners in this process wake it.
	Keys      KeyState
	PollEvery time.Duration

	signals   signals   // the requests held for a key, woken when its owner is done
	durations durations // how long recent operations took, for Retry-After
}

// KeyOf returns the key the middleware reserved for this request, or nil on a route without
// it. Handlers complete it in their business transaction (CompleteTx), or hand it to a
// multi-step operation, which records its progress with it.
func KeyOf(c echo.Context) models.OwnedKey {
	k, _ := c.Get(ctxKey).(models.OwnedKey)
	return k
}

// RequestOf returns what the route's Decoder read, for the handler to work with.
func RequestOf(c echo.Context) any { return c.Get(ctxRequest) }

// Route is the middleware of one idempotent route; decode says what the route's request is
// and what counts as the same request. Mount it after authentication:
//
//	g.POST("/orders", h.create, h.Idempotency.Route(decodeOrder))
//
// It Runs the handler under the request's key and sends the answer.
func (m *Middleware) Route(decode Decoder) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error { return m.Run(c, decode, next).Send(c) }
	}
}

// Answer is what a request came to under its key: the response to send — the handler's
// answer, or the stored one replayed — or an error for the central error handler.
type Answer struct {
	Response *models.Response
	Replayed bool
	Err      error
	// RetryAfter, in seconds, comes with models.ErrRequestInProgress and models.ErrLeaseLost.
	RetryAfter string
}

// Send writes the answer: the response with Idempotent-Replayed: true on a replay, or the
// error (with its Retry-After) for the error handler.
func (a Answer) Send(c echo.Context) error {
	if a.RetryAfter != "" {
		c.Response().Header().Set("Retry-After", a.RetryAfter)
	}
	if a.Err != nil {
		return a.Err
	}
	h := c.Response().Header()
	for _, name := range models.StoredHeaders {
		if v := a.Response.Header.Get(name); v != "" {
			h.Set(name, v)
		}
	}
	if a.Replayed {
		h.Set(HeaderReplayed, "true")
	}
	c.Response().WriteHeader(a.Response.Status)
	_, err := c.Response().Write(a.Response.Body)
	return err
}

// Run runs handler under the request's Idempotency-Key and returns the answer without sending
// it, for a handler that shows it its own way (the storefront's forms). It checks the key
// header (400 idempotency_key_required, invalid_idempotency_key), decodes the request (a 400
// of decode reserves nothing; the handler gets the request with RequestOf) and reserves the
// key:
//
//   - completed before with the same request: the stored answer, replayed; nothing runs;
//   - made by another principal, for another endpoint or request: 422 idempotency_key_reuse;
//   - held by a live request: 409 idempotency_request_in_progress with Retry-After, or, if
//     the request prefers to wait (Prefer: wait=N), held until the owner is done (wait.go);
//   - otherwise the request owns the key (new, or taken over to resume), and handler runs.
//
// After the handler the key is stored, forgotten or released (see disposition). If the store
// is down, the answer is 503 and nothing runs.
func (m *Middleware) Run(c echo.Context, decode Decoder, handler echo.HandlerFunc) Answer {
	if forgets(m.Store) {
		return m.runForgetful(c, decode, handler)
	}
	key, err := keyHeader(c.Request().Header)
	if err != nil {
		return Answer{Err: err}
	}
	req, fp, err := decode(c)
	if err != nil {
		return Answer{Err: err}
	}
	c.Set(ctxRequest, req)
	tenant, principal := m.Scope(c)
	if tenant == "" || principal == "" {
		return Answer{Err: errors.New("idempotency middleware mounted without authentication")}
	}
	rr := models.ReserveRequest{
		TenantID: tenant, Key: key, Principal: principal,
		Endpoint: c.Request().Method + " " + c.Path(), Fingerprint: fp.Hash, Params: fp.Params,
		Lease: m.Lease, Deferred: true,
	}
	return m.reserve(c, handler, rr, keyJournal{j: m.Journal, tenant: tenant, key: key}, 1)
}

// reserve decides what the key's state allows and, if the request owns the key, runs handler.
//
// The decision is a READ (rr.Deferred): a fresh key is not written here but by the first
// transaction of the operation, whose first statement is the key's INSERT (see
// models.IdempotencyKey). If another request with the same key got its INSERT in first, that
// transaction rolls back with ErrKeyTaken and we decide again, now finding the winner's key:
// in progress (409) or completed (the replay). A second lost race in a row answers 409.
func (m *Middleware) reserve(c echo.Context, handler echo.HandlerFunc, rr models.ReserveRequest, j keyJournal, round int) Answer {
	ctx := c.Request().Context()
	decidedAt := time.Now().UTC()
	res, err := m.Store.Reserve(ctx, rr)
	if err == nil && res.Outcome == models.InProgress {
		res, err = m.holdForOwner(c, rr, res) // if it asked to wait (Prefer: wait, wait.go)
	}
	if err != nil {
		// The cause is attached for the log; nothing ran, so a retry is safe.
		return Answer{Err: models.ErrServiceUnavailable.Wrap(err)}
	}
	switch res.Outcome {
	case models.Replay:
		m.Metrics.count("replayed")
		j.record(ctx, models.JournalReservation, "", fmt.Sprintf("replayed: the stored answer %d, nothing ran", res.Response.Status))
		return Answer{Response: res.Response, Replayed: true}
	case models.Mismatch:
		m.Metrics.count("mismatch")
		j.record(ctx, models.JournalReservation, "", "mismatch: the key was made for another request; 422, nothing ran")
		return Answer{Err: models.ErrKeyReuse}
	case models.InProgress:
		m.Metrics.count("conflict")
		wait := m.retryAfter(rr.Endpoint, res.RetryAfter) // an estimate, estimate.go
		j.record(ctx, models.JournalReservation, "", "in_progress: another request holds the key; 409 with Retry-After "+wait+"s")
		return Answer{Err: models.ErrRequestInProgress, RetryAfter: wait}
	}
	reserved := models.JournalEvent{At: decidedAt, OrderID: res.Key.OrderID(),
		Detail: fmt.Sprintf("reserved: a new key (attempt %d); its row commits with the operation's first transaction", res.Key.Attempts())}
	if res.Key.Attempts() > 1 {
		// A takeover wrote the key already (its compare-and-set): journal it now, so that
		// the timeline shows the resumption even if this request dies next.
		reserved.Detail = fmt.Sprintf("reserved: taken over, resuming at %s (attempt %d)", res.Key.RecoveryPoint(), res.Key.Attempts())
		j.recordEvent(ctx, models.JournalReservation, reserved)
	}
	answer := m.runOwned(c, handler, res.Key, j, reserved)
	if !errors.Is(answer.Err, models.ErrKeyTaken) {
		return answer
	}
	// Our INSERT lost to another request's: nothing of ours committed. Look again.
	if round < 2 {
		return m.reserve(c, handler, rr, j, round+1)
	}
	m.Metrics.count("conflict")
	return Answer{Err: models.ErrRequestInProgress, RetryAfter: "1"}
}

// forgetful is a Store that keeps no keys at all: the lab's true baseline
// (models.ForgetfulReservations).
type forgetful interface{ Forgets() bool }

func forgets(s Store) bool {
	f, ok := s.(forgetful)
	return ok && f.Forgets()
}

// runForgetful runs handler the way a shop without idempotency keys would: the header is not
// required, and ignored if present; nothing is read, written or journaled about a key. The
// handler still gets a key handle (in memory only), so the operation runs the same phases.
func (m *Middleware) runForgetful(c echo.Context, decode Decoder, handler echo.HandlerFunc) Answer {
	req, fp, err := decode(c)
	if err != nil {
		return Answer{Err: err}
	}
	c.Set(ctxRequest, req)
	res, err := m.Store.Reserve(c.Request().Context(), models.ReserveRequest{Params: fp.Params, Lease: m.Lease})
	if err != nil {
		return Answer{Err: models.ErrServiceUnavailable.Wrap(err)}
	}
	return m.runOwned(c, handler, res.Key, keyJournal{}, models.JournalEvent{})
}

// keyHeader returns the request's key, or why it is not acceptable.
func keyHeader(h http.Header) (string, error) {
	values := h.Values(HeaderKey)
	if len(values) == 0 {
		return "", models.ErrIdempotencyKeyRequired
	}
	key := values[0]
	if len(values) > 1 || key == "" || len(key) > MaxKeyLength {
		return "", models.ErrInvalidIdempotencyKey
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", models.ErrInvalidIdempotencyKey
		}
	}
	return key, nil
}

func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// keyJournal records events of one key of one tenant; the zero value records nothing.
type keyJournal struct {
	j           Journal
	tenant, key string
}

func (k keyJournal) record(ctx context.Context, kind, orderID, detail string) {
	k.recordEvent(ctx, kind, models.JournalEvent{OrderID: orderID, Detail: detail})
}

// recordEvent records ev (its At, OrderID and Detail) as the shop's event of kind.
func (k keyJournal) recordEvent(ctx context.Context, kind string, ev models.JournalEvent) {
	if k.j != nil {
		ev.TenantID, ev.IdempotencyKey, ev.Actor, ev.Kind = k.tenant, k.key, models.ActorShop, kind
		k.j.Record(ctx, ev)
	}
}
