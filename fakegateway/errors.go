package fakegateway

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
)

// apiError is an answer the gateway gives on purpose: a status, a stable code and a message,
// rendered as {"error": code, "message": message}. Anything else that reaches the error
// handler is a bug or an outage and becomes a 500 without details.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

func badRequest(code, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) *apiError {
	return badRequest("invalid_request", format, args...)
}

func notFound(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusNotFound, Code: "resource_missing", Message: fmt.Sprintf(format, args...)}
}

// errorBody is the JSON of every error answer.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// handleError is the gateway's one HTTPErrorHandler.
func (g *Gateway) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var ae *apiError
	var he *echo.HTTPError
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &he):
		ae = &apiError{Status: he.Code, Code: "http_error", Message: fmt.Sprint(he.Message)}
		switch he.Code {
		case http.StatusNotFound:
			ae.Code, ae.Message = "not_found", "no such endpoint"
		case http.StatusMethodNotAllowed:
			ae.Code, ae.Message = "method_not_allowed", "method not allowed on this endpoint"
		}
	default:
		g.log.ErrorContext(c.Request().Context(), "request failed", "method", c.Request().Method,
			"path", c.Path(), "err", err)
		ae = &apiError{Status: http.StatusInternalServerError, Code: "internal_error", Message: "the gateway failed unexpectedly"}
	}
	if err := c.JSON(ae.Status, errorBody{Error: ae.Code, Message: ae.Message}); err != nil {
		g.log.Warn("write error response", "err", err)
	}
}
