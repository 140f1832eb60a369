package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
	"checkoutlab/web/pages"
)

// statusOf maps the domain's error kinds to HTTP status codes: the only place that does.
var statusOf = map[models.Kind]int{
	models.KindInternal:      http.StatusInternalServerError,
	models.KindInvalid:       http.StatusBadRequest,
	models.KindUnauthorized:  http.StatusUnauthorized,
	models.KindDeclined:      http.StatusPaymentRequired,
	models.KindNotFound:      http.StatusNotFound,
	models.KindConflict:      http.StatusConflict,
	models.KindUnprocessable: http.StatusUnprocessableEntity,
	models.KindUnavailable:   http.StatusServiceUnavailable,
	models.KindBadGateway:    http.StatusBadGateway,
	models.KindTimeout:       http.StatusGatewayTimeout,
}

// StatusOf returns the HTTP status for err, as the error handler would answer it.
func StatusOf(err error) int {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return he.Code
	}
	return statusOf[models.ErrorOf(err).Kind]
}

// ErrorBody is the JSON shape of every API error: {"error": code, "message": text}, plus any
// extra fields (for example "decline_code", or "fields" naming invalid form fields).
func ErrorBody(err error) (int, map[string]any) {
	e := asDomainError(err)
	body := map[string]any{"error": e.Code, "message": e.Message}
	if e.Kind == models.KindInvalid && len(e.Fields) > 0 {
		body["fields"] = e.Fields
	} else {
		for k, v := range e.Fields {
			body[k] = v
		}
	}
	return statusOf[e.Kind], body
}

// ErrorResponse renders err as the central error handler would for an API request: the
// idempotency middleware stores it when the error is a business outcome (409 out_of_stock).
func ErrorResponse(err error) models.Response {
	status := StatusOf(err)
	_, body := ErrorBody(err)
	b, merr := encodeJSON(body)
	if merr != nil {
		b = fmt.Appendf(nil, `{"error":%q,"message":%q}`+"\n", models.ErrInternal.Code, models.ErrInternal.Message)
	}
	return models.Response{Status: status, Header: http.Header{echo.HeaderContentType: {echo.MIMEApplicationJSON}}, Body: b}
}

// asDomainError turns Echo's own errors (unknown route, body too large, CSRF) into the domain
// vocabulary, so API clients see one error shape whatever produced the error.
func asDomainError(err error) *models.Error {
	var he *echo.HTTPError
	if !errors.As(err, &he) {
		return models.ErrorOf(err)
	}
	msg, _ := he.Message.(string)
	switch he.Code {
	case http.StatusNotFound:
		return models.ErrNotFound.Msgf("no such page or endpoint")
	case http.StatusMethodNotAllowed:
		return models.ErrMethodNotAllowed
	case http.StatusRequestEntityTooLarge:
		return models.ErrRequestTooLarge
	case http.StatusForbidden, http.StatusBadRequest:
		if strings.Contains(strings.ToLower(msg), "csrf") {
			return models.ErrCSRFFailed
		}
		return models.ErrInvalid.Msgf("%s", msg)
	case http.StatusUnauthorized:
		return models.ErrUnauthorized
	case http.StatusServiceUnavailable:
		return models.ErrServiceUnavailable.Msgf("%s", msg)
	}
	return models.ErrorOf(err)
}

// ErrorHandler is the one place where errors become responses. API and webhook paths (and any
// request that asks for JSON) get the JSON error shape; browsers get an error page. Internal
// errors are logged with the request id and shown to users only as a generic message.
func ErrorHandler(logger *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		e := asDomainError(err)
		status := statusOf[e.Kind]
		var he *echo.HTTPError
		if errors.As(err, &he) && he.Code >= 400 && he.Code != http.StatusForbidden {
			status = he.Code
		}
		if status >= 500 {
			logger.ErrorContext(c.Request().Context(), "request failed",
				"request_id", RequestID(c), "method", c.Request().Method, "path", c.Path(), "status", status, "err", err)
		}
		if c.Request().Method == http.MethodHead {
			_ = c.NoContent(status)
			return
		}
		if WantsJSON(c) {
			_, body := ErrorBody(err)
			_ = writeJSON(c, status, body)
			return
		}
		vm := pages.ErrorPage{Status: status, Title: http.StatusText(status), Message: e.Message, RequestID: RequestID(c)}
		if status >= 500 {
			vm.Message = "Something went wrong on our side. Nothing was charged twice; please try again in a moment."
		}
		if err := render(c, status, pages.Error(vm)); err != nil {
			// The page itself could not be rendered (its context is gone, a template failed):
			// still answer, in plain text, rather than leave an empty 200.
			logger.ErrorContext(c.Request().Context(), "render error page", "request_id", RequestID(c), "err", err)
			_ = c.String(status, vm.Title+": "+vm.Message+"\n")
		}
	}
}

// WantsJSON reports whether the request is an API or webhook call, or asks for JSON.
func WantsJSON(c echo.Context) bool {
	p := c.Request().URL.Path
	return strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/webhooks/") ||
		strings.Contains(c.Request().Header.Get(echo.HeaderAccept), echo.MIMEApplicationJSON)
}

// writeJSON writes v as compact JSON with a trailing newline. Every API response goes through
// it, so the bytes a client sees are exactly the bytes the idempotency layer stores.
func writeJSON(c echo.Context, status int, v any) error {
	b, err := encodeJSON(v)
	if err != nil {
		return err
	}
	return c.Blob(status, echo.MIMEApplicationJSON, b)
}

// encodeJSON is the one JSON encoding of the API: compact, with a trailing newline.
func encodeJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
