package models

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
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

// Errorf builds an *Error of kind with code and a formatted message.
func Errorf(kind Kind, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Sentinel errors. Compare with errors.Is.
var (
	ErrNotFound     = &Error{Kind: KindNotFound, Code: "not_found", Message: "not found"}
	ErrConflict     = &Error{Kind: KindConflict, Code: "conflict", Message: "conflicts with the current state"}
	ErrOutOfStock   = &Error{Kind: KindConflict, Code: "out_of_stock", Message: "not enough stock"}
	ErrInvalid      = &Error{Kind: KindInvalid, Code: "invalid_request", Message: "invalid request"}
	ErrUnauthorized = &Error{Kind: KindUnauthorized, Code: "unauthorized", Message: "missing or unknown API key"}
)

// ErrorOf returns the *Error in err's chain; else, for a database that cannot be reached, a
// KindUnavailable error (503: retry later, with the same idempotency key); else a KindInternal
// error wrapping err.
func ErrorOf(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if IsUnavailable(err) {
		return &Error{Kind: KindUnavailable, Code: "database_unavailable",
			Message: "the database is not reachable right now; nothing was lost, retry with the same Idempotency-Key", Err: err}
	}
	return &Error{Kind: KindInternal, Code: "internal_error", Message: "something went wrong on our side", Err: err}
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
	return &Error{Kind: KindInvalid, Code: "invalid_request", Message: message, Fields: fields}
}
