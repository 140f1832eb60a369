package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/payments"
)

// The answers of the idempotency layer itself (contract section 3).
var (
	ErrIdempotencyKeyRequired = &models.Error{Kind: models.KindInvalid, Code: "idempotency_key_required",
		Message: "this endpoint needs an Idempotency-Key header: a unique value per operation, sent again on every retry"}
	ErrInvalidIdempotencyKey = &models.Error{Kind: models.KindInvalid, Code: "invalid_idempotency_key",
		Message: "Idempotency-Key must be 1 to 255 printable ASCII characters"}
	ErrRequestInProgress = &models.Error{Kind: models.KindConflict, Code: "idempotency_request_in_progress",
		Message: "a request with this Idempotency-Key is still being processed; retry after the time in Retry-After"}
	ErrKeyReuse = &models.Error{Kind: models.KindUnprocessable, Code: "idempotency_key_reuse",
		Message: "this Idempotency-Key was already used for a different request; use a new key for a new operation"}
	ErrIdempotencyUnavailable = &models.Error{Kind: models.KindUnavailable, Code: "service_unavailable",
		Message: "the service is temporarily unavailable; retry with the same Idempotency-Key"}
)

// MaxIdempotencyKeyLength is the longest key accepted, as at Stripe.
const MaxIdempotencyKeyLength = 255

// HeaderIdempotencyKey and HeaderIdempotentReplayed are the request and replay headers.
const (
	HeaderIdempotencyKey     = "Idempotency-Key"
	HeaderIdempotentReplayed = "Idempotent-Replayed"
)

const ctxIdempotencyKey = "idempotency_key"

// KeyReserver is what the middleware needs from the idempotency store.
type KeyReserver interface {
	Reserve(ctx context.Context, req models.ReserveRequest) (*models.Reservation, error)
}

// IdempotencyMetrics counts what happened to idempotent requests, by outcome:
// created (first answer stored), replayed, conflict (409 in progress), mismatch (422 reuse),
// released (infrastructure failure, progress kept) and deleted (validation error, not stored).
type IdempotencyMetrics struct{ outcomes *prometheus.CounterVec }

// NewIdempotencyMetrics registers the counters on reg.
func NewIdempotencyMetrics(reg prometheus.Registerer) *IdempotencyMetrics {
	m := &IdempotencyMetrics{outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "checkoutlab_idempotency_outcomes_total",
		Help: "Idempotent requests by outcome: created, replayed, conflict, mismatch, released, deleted.",
	}, []string{"outcome"})}
	for _, o := range []string{"created", "replayed", "conflict", "mismatch", "released", "deleted"} {
		m.outcomes.WithLabelValues(o) // show every outcome on /metrics from the start, at 0
	}
	reg.MustRegister(m.outcomes)
	return m
}

func (m *IdempotencyMetrics) count(outcome string) {
	if m != nil {
		m.outcomes.WithLabelValues(outcome).Inc()
	}
}

// IdempotencyKeyOf returns the key the Idempotent middleware reserved for this request, or nil
// on a route without it. Handlers pass it to CompleteKeyTx (or use its AdvanceTx/LinkTx for
// multi-step operations).
func IdempotencyKeyOf(c echo.Context) *models.IdempotencyKey {
	k, _ := c.Get(ctxIdempotencyKey).(*models.IdempotencyKey)
	return k
}

// Idempotent makes a mutating route safe to retry. Apply it per route, after authentication
// (it scopes keys to TenantOf and PrincipalOf):
//
//	g.POST("/orders", h.create, handlers.Idempotent(store, lease, handlers.OrderFingerprint, metrics))
//
// For each request it validates the Idempotency-Key header (400 idempotency_key_required or
// invalid_idempotency_key), reads the body and computes its fingerprint (400 on a body it
// cannot read; nothing is reserved), and reserves the key:
//
//   - completed before with the same fingerprint: replays the stored status, Content-Type,
//     Location and body byte for byte, adds Idempotent-Replayed: true, runs nothing;
//   - another principal, endpoint or fingerprint: 422 idempotency_key_reuse;
//   - held by a live request: 409 idempotency_request_in_progress with Retry-After;
//   - otherwise the request owns the key, and the handler runs while a renewer extends the
//     lease every lease/3 (and cancels the request's context if the lease is lost).
//
// After the handler, the middleware decides what the key keeps (see disposition): a business
// outcome is stored, a validation error deletes the key, an infrastructure failure or a panic
// releases it with its progress. It writes the response bytes itself, so the first answer and
// every replay are identical. If the store is down, the answer is 503 and nothing runs.
//
// WithJournal records each reservation's answer and each disposition in the journal.
func Idempotent(store KeyReserver, lease time.Duration, fingerprint FingerprintFunc, metrics *IdempotencyMetrics, opts ...IdempotencyOption) echo.MiddlewareFunc {
	var o idempotencyOptions
	for _, opt := range opts {
		opt(&o)
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			key, err := idempotencyKeyHeader(c.Request().Header)
			if err != nil {
				return err
			}
			tenant, principal := TenantOf(c), PrincipalOf(c)
			if tenant == nil || principal == "" {
				return errors.New("idempotency middleware mounted without authentication")
			}
			body, err := io.ReadAll(c.Request().Body)
			if err != nil {
				return err // the body limit's 413, or a client that went away
			}
			c.Request().Body = io.NopCloser(bytes.NewReader(body)) // the handler reads it again
			fp, err := fingerprint(body)
			if err != nil {
				return err
			}

			req := models.ReserveRequest{
				TenantID: tenant.ID, Key: key, Principal: principal,
				Endpoint: c.Request().Method + " " + c.Path(), Fingerprint: fp.Hash, Params: fp.Params,
				Lease: lease,
			}
			reserve := store.Reserve
			switch {
			case !o.protections.On(payments.SwitchServerIdempotency):
				// LAB ONLY: the operation runs under a key no retry will ever name, so the
				// server remembers nothing: each request is a new operation.
				req.Key = models.NewID("forgotten")
			case !o.protections.On(payments.SwitchAtomicReservation):
				racy, ok := store.(interface {
					ReserveCheckThenInsert(context.Context, models.ReserveRequest) (*models.Reservation, error)
				})
				if !ok {
					return errors.New("atomic_reservation off needs a store with ReserveCheckThenInsert")
				}
				reserve = racy.ReserveCheckThenInsert // LAB ONLY: check, then insert at the end
			}
			res, err := reserve(c.Request().Context(), req)
			if err != nil {
				// 503 with the cause attached for the log; nothing ran, so a retry is safe.
				return &models.Error{Kind: models.KindUnavailable, Code: ErrIdempotencyUnavailable.Code,
					Message: ErrIdempotencyUnavailable.Message, Err: err}
			}
			j := keyJournal{j: o.journal, tenant: tenant.ID, key: key}
			switch res.Outcome {
			case models.Replay:
				metrics.count("replayed")
				j.record(c.Request().Context(), models.JournalReservation, "",
					fmt.Sprintf("replayed: the stored answer %d, nothing ran", res.Response.Status))
				return writeStored(c, res.Response, true)
			case models.Mismatch:
				metrics.count("mismatch")
				j.record(c.Request().Context(), models.JournalReservation, "",
					"mismatch: the key was made for another request; 422, nothing ran")
				return ErrKeyReuse
			case models.InProgress:
				metrics.count("conflict")
				j.record(c.Request().Context(), models.JournalReservation, "",
					"in_progress: another request holds the key; 409 with Retry-After "+retryAfterSeconds(res.RetryAfter)+"s")
				c.Response().Header().Set("Retry-After", retryAfterSeconds(res.RetryAfter))
				return ErrRequestInProgress
			}
			how := "a new key"
			if res.Key.Attempts() > 1 {
				how = "taken over, resuming at " + res.Key.RecoveryPoint()
			}
			j.record(c.Request().Context(), models.JournalReservation, res.Key.OrderID(),
				fmt.Sprintf("reserved: %s (attempt %d)", how, res.Key.Attempts()))
			return runOwned(c, next, res.Key, metrics, j)
		}
	}
}

// idempotencyKeyHeader returns the request's key, or why it is not acceptable.
func idempotencyKeyHeader(h http.Header) (string, error) {
	values := h.Values(HeaderIdempotencyKey)
	if len(values) == 0 {
		return "", ErrIdempotencyKeyRequired
	}
	key := values[0]
	if len(values) > 1 || key == "" || len(key) > MaxIdempotencyKeyLength {
		return "", ErrInvalidIdempotencyKey
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", ErrInvalidIdempotencyKey
		}
	}
	return key, nil
}

func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// disposition is what happens to an owned key once the handler has answered.
type disposition int

const (
	store   disposition = iota // a business outcome: keep the answer and replay it
	forget                     // a validation error: delete the key so it can be used again
	release                    // an infrastructure failure: free the lease, keep progress
)

// dispositionOf classifies an answer. Stored: success, and the business rejections a retry
// would only repeat (402 declined, 409 conflicts such as out_of_stock or order_already_paid).
// Forgotten: errors in the request itself (400, 401, 404, 422, 429), which a corrected request
// under the same key may fix. Released: everything else (5xx: database, gateway, timeout), whose
// outcome may be unknown, so a retry must resume rather than start again or replay a failure.
func dispositionOf(status int) disposition {
	switch {
	case status < 400, status == http.StatusPaymentRequired, status == http.StatusConflict:
		return store
	case status < 500:
		return forget
	default:
		return release
	}
}

// runOwned runs the handler while the request owns key, then stores, forgets or releases it.
func runOwned(c echo.Context, next echo.HandlerFunc, key *models.IdempotencyKey, metrics *IdempotencyMetrics, j keyJournal) error {
	req := c.Request()
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	c.SetRequest(req.WithContext(ctx))
	// Give back the request with its own context: middleware outside this one (the
	// storefront's presenter) keeps working with it after the key is settled.
	defer c.SetRequest(req)
	c.Set(ctxIdempotencyKey, key)
	renew := startRenewer(ctx, key, cancel)
	rec := startRecording(c.Response())
	err, panicked := callHandler(next, c)
	leaseLost := renew.stop()
	status, header, body := rec.stop()

	// Cleanup must happen even when the request's context is cancelled (client gone, lease
	// lost), so it runs on a context of its own, made now: its deadline counts from the end
	// of the handler, however long the handler took.
	cleanupCtx, cleanupCancel := context.WithTimeout(context.WithoutCancel(req.Context()), 5*time.Second)
	defer cleanupCancel()

	if panicked != nil {
		// The work may be half done: keep the progress, free the key, and let the router's
		// Recover middleware answer 500.
		_ = key.Release(cleanupCtx)
		metrics.count("released")
		j.record(cleanupCtx, models.JournalDisposition, key.OrderID(), "released: the handler panicked; progress kept at "+key.RecoveryPoint())
		panic(panicked)
	}
	if err == nil && key.Completed() {
		// The handler completed the key in its business transaction (the normal path): the
		// bytes it wrote are the bytes it stored.
		metrics.count("created")
		j.record(cleanupCtx, models.JournalDisposition, key.OrderID(),
			fmt.Sprintf("stored: %d, completed in the operation's last transaction", status))
		return writeStored(c, &models.StoredResponse{Status: status, Header: header, Body: body}, false)
	}
	if leaseLost || errors.Is(err, models.ErrLeaseLost) {
		// Another request owns the key now; whatever we did was rolled back by the fence. Its
		// outcome is the answer, which a retry will get.
		c.Response().Header().Set("Retry-After", "1")
		j.record(cleanupCtx, models.JournalDisposition, key.OrderID(), "lost: another request took the key over; its outcome is the answer")
		return models.ErrLeaseLost
	}
	if err != nil {
		c.Response().Header().Del(echo.HeaderLocation) // a failed answer points nowhere
		if req.Context().Err() != nil {
			// The client went away: its outcome is unknown to it, so keep the progress.
			_ = key.Release(cleanupCtx)
			metrics.count("released")
			j.record(cleanupCtx, models.JournalDisposition, key.OrderID(), "released: the client went away; progress kept at "+key.RecoveryPoint())
			return err
		}
		status, header, body = errorResponse(err)
	}

	disposition := dispositionOf(status)
	if errors.Is(err, models.ErrPaymentInProgress) {
		// A 409 that describes a passing state (another payment of the order is being
		// confirmed), not an outcome of this request: storing it would refuse the key forever.
		// The operation wrote nothing, so the key is forgotten and may be used again.
		disposition = forget
	}
	switch disposition {
	case store:
		if cerr := key.Complete(cleanupCtx, status, header, body); cerr != nil {
			// The answer could not be stored. Release so that a retry is not stuck with 409;
			// the operation's own guards (conditional updates, unique constraints) remain.
			_ = key.Release(cleanupCtx)
			metrics.count("released")
			j.record(cleanupCtx, models.JournalDisposition, key.OrderID(),
				fmt.Sprintf("released: the answer %d could not be stored; progress kept at %s", status, key.RecoveryPoint()))
			if errors.Is(cerr, models.ErrLeaseLost) {
				return models.ErrLeaseLost
			}
			return cerr
		}
		metrics.count("created")
		j.record(cleanupCtx, models.JournalDisposition, key.OrderID(), fmt.Sprintf("stored: %d", status))
		return writeStored(c, &models.StoredResponse{Status: status, Header: header, Body: body}, false)
	case forget:
		if deleted, _ := key.Delete(cleanupCtx); deleted {
			metrics.count("deleted")
			j.record(cleanupCtx, models.JournalDisposition, key.OrderID(), fmt.Sprintf("forgotten: %d, the key may be used again", status))
		} else {
			metrics.count("released")
			j.record(cleanupCtx, models.JournalDisposition, key.OrderID(),
				fmt.Sprintf("released: %d after progress; kept at %s", status, key.RecoveryPoint()))
		}
	default:
		_ = key.Release(cleanupCtx)
		metrics.count("released")
		j.record(cleanupCtx, models.JournalDisposition, key.OrderID(),
			fmt.Sprintf("released: %d, the outcome may be unknown; progress kept at %s for a retry", status, key.RecoveryPoint()))
	}
	if err != nil {
		return err // the central error handler renders it, exactly as errorResponse did
	}
	return writeStored(c, &models.StoredResponse{Status: status, Header: header, Body: body}, false)
}

// IdempotencyOption configures Idempotent.
type IdempotencyOption func(*idempotencyOptions)

type idempotencyOptions struct {
	journal     IdempotencyJournal
	protections payments.Protections
}

// WithProtections turns one mechanism of the middleware off (server_idempotency or
// atomic_reservation). Only the failure lab uses it; see payments.Protections.
func WithProtections(p payments.Protections) IdempotencyOption {
	return func(o *idempotencyOptions) { o.protections = p }
}

// IdempotencyJournal is where the middleware records the answers and dispositions of keys.
// *models.JournalStore is one.
type IdempotencyJournal interface {
	Record(ctx context.Context, ev models.JournalEvent)
}

// WithJournal makes Idempotent record every reservation's answer and every disposition.
func WithJournal(j IdempotencyJournal) IdempotencyOption {
	return func(o *idempotencyOptions) { o.journal = j }
}

// keyJournal records events of one key of one tenant; the zero value records nothing.
type keyJournal struct {
	j           IdempotencyJournal
	tenant, key string
}

func (k keyJournal) record(ctx context.Context, kind, orderID, detail string) {
	if k.j != nil {
		k.j.Record(ctx, models.JournalEvent{TenantID: k.tenant, IdempotencyKey: k.key, OrderID: orderID,
			Actor: models.ActorShop, Kind: kind, Detail: detail})
	}
}

// callHandler runs next and turns a panic into a value, so the key can be released first.
func callHandler(next echo.HandlerFunc, c echo.Context) (err error, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	return next(c), nil
}

// errorResponse renders err as the central error handler would for an API request.
func errorResponse(err error) (int, http.Header, []byte) {
	status := StatusOf(err)
	_, body := ErrorBody(err)
	b, merr := encodeJSON(body)
	if merr != nil {
		b = []byte(`{"error":"internal_error","message":"something went wrong on our side"}` + "\n")
	}
	return status, http.Header{echo.HeaderContentType: {echo.MIMEApplicationJSON}}, b
}

// writeStored writes a response: its status, its stored headers and its body, byte for byte.
// replayed adds Idempotent-Replayed: true.
func writeStored(c echo.Context, r *models.StoredResponse, replayed bool) error {
	h := c.Response().Header()
	for _, name := range models.StoredHeaders {
		if v := r.Header.Get(name); v != "" {
			h.Set(name, v)
		}
	}
	if replayed {
		h.Set(HeaderIdempotentReplayed, "true")
	}
	c.Response().WriteHeader(r.Status)
	_, err := c.Response().Write(r.Body)
	return err
}

// CompleteKeyTx stores r as the answer of the request's idempotency key inside tx, the
// transaction of the business write, and links the order (if orderID is not empty). On a
// route without a key it does nothing. It returns models.ErrLeaseLost if another request took
// the key over: return it, so the transaction rolls back.
func CompleteKeyTx(c echo.Context, tx *gorm.DB, r Response, orderID string) error {
	key := IdempotencyKeyOf(c)
	if key == nil {
		return nil
	}
	if orderID != "" {
		if err := key.LinkTx(tx, orderID, ""); err != nil {
			return err
		}
	}
	return key.CompleteTx(tx, r.Status, r.Header, r.Body)
}

// Response is an answer prepared before it is written, so that exactly these bytes can be both
// stored with an idempotency key and sent.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSONResponse encodes v the way writeJSON does.
func JSONResponse(status int, v any) (Response, error) {
	b, err := encodeJSON(v)
	if err != nil {
		return Response{}, err
	}
	return Response{Status: status, Header: http.Header{echo.HeaderContentType: {echo.MIMEApplicationJSON}}, Body: b}, nil
}

// Write sends r.
func (r Response) Write(c echo.Context) error {
	for name, values := range r.Header {
		for _, v := range values {
			c.Response().Header().Set(name, v)
		}
	}
	return c.Blob(r.Status, r.Header.Get(echo.HeaderContentType), r.Body)
}
