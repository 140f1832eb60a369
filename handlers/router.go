// Package handlers holds the shop's HTTP layer: Echo handlers grouped by area (each group a
// struct with Routes), the middleware they share, and the one error handler. Handlers decode,
// call a store or an operation, and render; they never contain SQL.
package handlers

import (
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

// MaxBodyBytes caps every request body. A checkout is a few hundred bytes; anything near this
// size is a mistake or an attack, and gets 413 request_too_large before a handler runs.
const MaxBodyBytes = "64K"

// NewRouter returns an Echo instance with the shop's common middleware and error handler.
// Route groups are mounted by the caller (cmd/shop), so what is served is visible in one place.
func NewRouter(logger *slog.Logger, reg prometheus.Registerer) *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = ErrorHandler(logger)
	e.Use(
		RequestIDMiddleware(),
		LoggingMiddleware(logger),
		// Panics become errors (500) handled like any other; the request's idempotency key,
		// if any, is released by the idempotency middleware rather than left locked.
		middleware.RecoverWithConfig(middleware.RecoverConfig{DisableErrorHandler: true, DisablePrintStack: true}),
		MetricsMiddleware(reg),
		middleware.BodyLimit(MaxBodyBytes),
		middleware.SecureWithConfig(middleware.SecureConfig{
			XSSProtection: "0", ContentTypeNosniff: "nosniff", XFrameOptions: "SAMEORIGIN",
			ReferrerPolicy: "same-origin",
		}),
	)
	return e
}

// CSRF protects every state-changing browser form: a token in a cookie that the form must echo
// in a hidden "_csrf" field (or the X-CSRF-Token header for fetch), and on modern browsers the
// Sec-Fetch-Site header, which a cross-site form cannot forge.
func CSRF() echo.MiddlewareFunc {
	return middleware.CSRFWithConfig(middleware.CSRFConfig{
		TokenLookup:    "form:_csrf,header:X-CSRF-Token",
		CookieName:     "checkoutlab_csrf",
		CookiePath:     "/",
		CookieHTTPOnly: true,
		CookieSameSite: http.SameSiteLaxMode,
	})
}

// CSRFToken returns the token to embed in forms.
func CSRFToken(c echo.Context) string { s, _ := c.Get("csrf").(string); return s }
