package idempotency

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
)

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
// reserved is the journal event of a fresh key's reservation: it is recorded once the key is
// known to be ours, that is unless the key's INSERT lost to another request's (ErrKeyTaken,
// which the caller answers by deciding again).
func (m *Middleware) runOwned(c echo.Context, handler echo.HandlerFunc, key models.OwnedKey, j keyJournal, reserved models.JournalEvent) Answer {
	defer m.settled(c, j, key, time.Now()) // last, once the disposition has committed: wake the waiters
	req := c.Request()
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	c.SetRequest(req.WithContext(ctx))
	// Give back the request with its own context: the caller keeps working with it after the
	// key is settled (the storefront renders its page).
	defer c.SetRequest(req)
	c.Set(ctxKey, key)
	renew := startRenewer(ctx, key, cancel)
	rec := startRecording(c.Response())
	err, panicked := callHandler(handler, c)
	leaseLost := renew.stop()
	answer := rec.stop()

	// Cleanup must happen even when the request's context is cancelled (client gone, lease
	// lost), so it runs on a context of its own, made now: its deadline counts from the end
	// of the handler, however long the handler took.
	cleanupCtx, cleanupCancel := context.WithTimeout(context.WithoutCancel(req.Context()), 5*time.Second)
	defer cleanupCancel()
	released := func(detail string) {
		_ = key.Release(cleanupCtx)
		m.Metrics.count("released")
		j.record(cleanupCtx, models.JournalDisposition, key.OrderID(), "released: "+detail)
	}

	if errors.Is(err, models.ErrKeyTaken) {
		// Another request inserted this key first; our transaction rolled back, so nothing
		// of ours exists to store, forget or release.
		return Answer{Err: models.ErrKeyTaken}
	}
	if key.Attempts() == 1 && reserved.Detail != "" {
		j.recordEvent(cleanupCtx, models.JournalReservation, reserved)
	}
	if panicked != nil {
		// The work may be half done: keep the progress, free the key, and let the router's
		// Recover middleware answer 500.
		released("the handler panicked; progress kept at " + key.RecoveryPoint())
		panic(panicked)
	}
	if err == nil && key.Completed() {
		// The handler completed the key in its business transaction (the normal path): the
		// bytes it wrote are the bytes it stored.
		m.Metrics.count("created")
		j.record(cleanupCtx, models.JournalDisposition, key.OrderID(),
			fmt.Sprintf("stored: %d, completed in the operation's last transaction", answer.Status))
		return Answer{Response: answer}
	}
	if leaseLost || errors.Is(err, models.ErrLeaseLost) {
		// Another request owns the key now; whatever we did was rolled back by the fence. Its
		// outcome is the answer, which a retry will get.
		j.record(cleanupCtx, models.JournalDisposition, key.OrderID(), "lost: another request took the key over; its outcome is the answer")
		return Answer{Err: models.ErrLeaseLost, RetryAfter: "1"}
	}
	if err != nil {
		if req.Context().Err() != nil {
			// The client went away: its outcome is unknown to it, so keep the progress.
			released("the client went away; progress kept at " + key.RecoveryPoint())
			return Answer{Err: err}
		}
		rendered := m.RenderError(err)
		answer = &rendered
	}

	disposition := dispositionOf(answer.Status)
	if errors.Is(err, models.ErrPaymentInProgress) {
		// A 409 that describes a passing state (another payment of the order is being
		// confirmed), not an outcome of this request: storing it would refuse the key forever.
		// The operation wrote nothing, so the key is forgotten and may be used again.
		disposition = forget
	}
	switch disposition {
	case store:
		cerr := key.Complete(cleanupCtx, *answer)
		if errors.Is(cerr, models.ErrKeyTaken) {
			// A fresh key whose operation wrote nothing (its transaction rolled back, as for
			// out_of_stock): another request made the key meanwhile. Its outcome decides.
			return Answer{Err: models.ErrKeyTaken}
		}
		if cerr != nil {
			// The answer could not be stored. Release so that a retry is not stuck with 409;
			// the operation's own guards (conditional updates, unique constraints) remain.
			released(fmt.Sprintf("the answer %d could not be stored; progress kept at %s", answer.Status, key.RecoveryPoint()))
			if errors.Is(cerr, models.ErrLeaseLost) {
				return Answer{Err: models.ErrLeaseLost}
			}
			return Answer{Err: cerr}
		}
		m.Metrics.count("created")
		j.record(cleanupCtx, models.JournalDisposition, key.OrderID(), fmt.Sprintf("stored: %d", answer.Status))
		return Answer{Response: answer}
	case forget:
		if deleted, _ := key.Delete(cleanupCtx); deleted {
			m.Metrics.count("deleted")
			j.record(cleanupCtx, models.JournalDisposition, key.OrderID(), fmt.Sprintf("forgotten: %d, the key may be used again", answer.Status))
		} else {
			m.Metrics.count("released")
			j.record(cleanupCtx, models.JournalDisposition, key.OrderID(),
				fmt.Sprintf("released: %d after progress; kept at %s", answer.Status, key.RecoveryPoint()))
		}
	default:
		released(fmt.Sprintf("%d, the outcome may be unknown; progress kept at %s for a retry", answer.Status, key.RecoveryPoint()))
	}
	if err != nil {
		return Answer{Err: err} // the central error handler renders it, exactly as RenderError did
	}
	return Answer{Response: answer}
}

// callHandler runs handler and turns a panic into a value, so the key can be released first.
func callHandler(handler echo.HandlerFunc, c echo.Context) (err error, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	return handler(c), nil
}
