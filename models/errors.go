package models

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Kind is the small vocabulary of failure that the whole shop speaks. The central HTTP error
// handler maps each kind to one status code; nothing below the handlers knows about HTTP.
type Kind int

const (
	KindInternal      Kind = iota // a bug or an unexpected failure: 500
	KindInvalid                   // the request is malformed: 400
	KindUnauthorized              // missing or unknown credentials: 401
	KindDeclined                  // the payment was refused: 402
	KindNotFound                  // no such thing for this tenant: 404
	KindConflict                  // the request conflicts with current state: 409
	KindUnprocessable             // well-formed, but cannot be applied (e.g. a reused key): 422
	KindUnavailable               // a dependency is down or did not answer: 503
	KindBadGateway                // a dependency answered with an error: 502
	KindTimeout                   // a dependency did not answer in time: 504
)

// Error is a failure with a stable, machine-readable Code (sent to API clients as "error"),
// a human Message, and optional extra Fields (e.g. "decline_code", or per-form-field messages).
type Error struct {
	Kind    Kind
	Code    string
	Message string
	Fields  map[string]string
	Err     error // the cause, for logs only; never shown to users
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNotFound) true for any *Error with the same Code, so a store can
// return a specific message ("product X not found") and callers still test the category.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf builds an *Error of kind with code and a formatted message. code must be one of the
// catalogue below; most callers want Msgf on its error instead.
func Errorf(kind Kind, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Msgf returns e with another message: the same code and kind, e.g.
// ErrNotFound.Msgf("no order %q", id).
func (e *Error) Msgf(format string, args ...any) *Error {
	c := *e
	c.Message = fmt.Sprintf(format, args...)
	return &c
}

// Wrap returns e with err as its cause, for the log; users never see it.
func (e *Error) Wrap(err error) *Error {
	c := *e
	c.Err = err
	return &c
}

// WithFields returns e with extra fields for the answer, e.g. {"sku": "camp-mug"}.
func (e *Error) WithFields(fields map[string]string) *Error {
	c := *e
	c.Fields = fields
	return &c
}

// The catalogue: every error the shop can answer with, declared once, with its code (stable:
// API clients program against it), its kind (which decides the HTTP status, in
// handlers/errors.go) and its default message. docs/api.md's error table lists exactly these
// codes (TestErrorTableListsTheCatalogue), and no code is made up anywhere else
// (TestNoCodeOutsideTheCatalogue). A more specific message, a cause or extra fields are added
// with Msgf, Wrap and WithFields, which keep the code. Compare with errors.Is: it matches any
// error of the same code.
var (
	// Any request.
	ErrInternal         = declare(KindInternal, "internal_error", "something went wrong on our side")
	ErrInvalid          = declare(KindInvalid, "invalid_request", "invalid request")
	ErrInvalidJSON      = declare(KindInvalid, "invalid_json", "the request body is not valid JSON")
	ErrNotFound         = declare(KindNotFound, "not_found", "not found")
	ErrMethodNotAllowed = declare(KindInvalid, "method_not_allowed", "method not allowed on this endpoint")
	ErrRequestTooLarge  = declare(KindInvalid, "request_too_large", "the request body is too large")
	ErrUnauthorized     = declare(KindUnauthorized, "unauthorized", "missing or unknown API key")
	ErrCSRFFailed       = declare(KindInvalid, "csrf_failed",
		"the form expired or did not come from this site; reload the page and try again")
	ErrServiceUnavailable = declare(KindUnavailable, "service_unavailable",
		"the service is temporarily unavailable; retry with the same Idempotency-Key")
	ErrDatabaseUnavailable = declare(KindUnavailable, "database_unavailable",
		"the database is not reachable right now; nothing was lost, retry with the same Idempotency-Key")
	// ErrRequestTimeout: the client stalled its request body past the server's read timeout.
	ErrRequestTimeout = declare(KindInvalid, "request_timeout",
		"the request body did not arrive in time; nothing was done, send it again")
	// ErrMisdirectedRequest: the Host header names none of the shop's names (the allowed-hosts
	// check).
	ErrMisdirectedRequest    = declare(KindInvalid, "misdirected_request", "this server does not answer for that host name")
	ErrOperatorLoginRequired = declare(KindUnauthorized, "operator_login_required",
		"this is an operator page: log in at /ops/login first")

	// The idempotency layer (handlers/idempotency).
	ErrIdempotencyKeyRequired = declare(KindInvalid, "idempotency_key_required",
		"this endpoint needs an Idempotency-Key header: a unique value per operation, sent again on every retry")
	ErrInvalidIdempotencyKey = declare(KindInvalid, "invalid_idempotency_key",
		"Idempotency-Key must be 1 to 255 printable ASCII characters")
	ErrRequestInProgress = declare(KindConflict, "idempotency_request_in_progress",
		"a request with this Idempotency-Key is still being processed; retry after the time in Retry-After")
	ErrKeyReuse = declare(KindUnprocessable, "idempotency_key_reuse",
		"this Idempotency-Key was already used for a different request; use a new key for a new operation")
	// ErrLeaseLost is returned by the fenced methods of an IdempotencyKey when its owner no
	// longer holds the lease: it expired and another request took the key over (or the key is
	// already completed). The caller's transaction must roll back; the new owner decides the
	// outcome.
	ErrLeaseLost = declare(KindConflict, "idempotency_lease_lost",
		"another request took over this idempotency key; retry with the same key to get its outcome")

	// Carts and orders.
	ErrUnknownProduct = declare(KindNotFound, "unknown_product", "unknown product")
	ErrOutOfStock     = declare(KindConflict, "out_of_stock", "not enough stock")
	ErrNotInCart      = declare(KindNotFound, "not_in_cart", "the product is not in your cart")
	// ErrCartConverted: an order is placed from a cart that already became an order.
	ErrCartConverted = declare(KindConflict, "cart_already_converted", "this cart has already been turned into an order")

	// ErrOrderExpired: a payment for an order that was not paid within ORDER_HOLD.
	ErrOrderExpired = declare(KindConflict, "order_expired",
		"this order was not paid in time and has expired; its items went back on sale, so place a new order")

	// Payments.
	ErrOrderAlreadyPaid = declare(KindConflict, "order_already_paid", "this order has already been paid")
	// ErrPaymentInProgress: a new payment is attempted while another payment of the same order
	// has an outcome that is not known yet.
	ErrPaymentInProgress = declare(KindConflict, "payment_in_progress",
		"another payment of this order is still being confirmed; wait for its outcome")
	ErrAmountMismatch     = declare(KindInvalid, "amount_mismatch", "the payment must be for the order total")
	ErrCardDeclined       = declare(KindDeclined, "card_declined", "Your card was declined. Try another card.")
	ErrGatewayUnavailable = declare(KindUnavailable, "gateway_unavailable",
		"the payment provider is unavailable and nothing was charged; retry with the same Idempotency-Key")
	// ErrPaymentOutcomeUnknown is a 502; after a gateway timeout, a KindTimeout (504).
	ErrPaymentOutcomeUnknown = declare(KindBadGateway, "payment_outcome_unknown",
		"we could not confirm the payment with the provider yet; retry with the same Idempotency-Key — you will not be charged twice")

	// The triage desk (payments/triage.go).
	ErrActionNotAllowed = declare(KindConflict, "action_not_allowed",
		"this action is not allowed for this order now; nothing was done")
	// ErrRefundOutcomeUnknown: the gateway's answer to a refund was lost. Its key is derived
	// from the order and the charge, so a retry refunds at most once.
	ErrRefundOutcomeUnknown = declare(KindBadGateway, "refund_outcome_unknown",
		"the gateway's answer to the refund was lost; retry the action, it refunds at most once")

	// The webhook endpoint.
	ErrUnreadableBody   = declare(KindInvalid, "unreadable_body", "the request body could not be read")
	ErrMissingSignature = declare(KindInvalid, "missing_signature",
		"webhook-id, webhook-timestamp and webhook-signature headers are required")
	ErrStaleWebhook     = declare(KindInvalid, "stale_webhook", "the webhook timestamp is more than 5 minutes from now")
	ErrInvalidSignature = declare(KindUnauthorized, "invalid_signature", "the webhook signature does not match")
)

// catalogue holds every declared error by its code.
var catalogue = map[string]*Error{}

func declare(kind Kind, code, message string) *Error {
	if _, dup := catalogue[code]; dup {
		panic("models: error code " + code + " declared twice")
	}
	e := &Error{Kind: kind, Code: code, Message: message}
	catalogue[code] = e
	return e
}

// Codes returns every code of the catalogue, sorted.
func Codes() []string { return slices.Sorted(maps.Keys(catalogue)) }

// ErrorOf returns the *Error in err's chain; else, for a database that cannot be reached, a
// KindUnavailable error (503: retry later, with the same idempotency key); else a KindInternal
// error wrapping err.
func ErrorOf(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if IsUnavailable(err) {
		return ErrDatabaseUnavailable.Wrap(err)
	}
	return ErrInternal.Wrap(err)
}

// IsUnavailable reports whether err means the database could not be reached or went away
// (connection refused or reset, the server shutting down or refusing connections), as opposed
// to a bug or a rejected statement.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true // whatever the server said, we could not get a connection
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P01–57P03: admin shutdown, crash shutdown,
		// cannot connect now; 3D000: the database does not exist (dropped, or not yet made).
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "3D000"
	}
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "connection refused") ||
		strings.Contains(msg, "unexpected EOF") || strings.Contains(msg, "database is closed")
}

// Invalid returns a validation error listing field problems, e.g. {"email": "is required"}.
func Invalid(message string, fields map[string]string) *Error {
	return ErrInvalid.Msgf("%s", message).WithFields(fields)
}
