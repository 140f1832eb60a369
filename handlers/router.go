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

// ContentSecurityPolicy lets pages load scripts, styles, images and requests from the shop
// itself only: no inline script or style, no plug-ins, no framing by other sites, and forms
// post only here. The pages are built for it — htmx and checkout.js are files under /static,
// and no template writes a script or a style attribute — so an injected <script> or a
// cross-site form action would simply not run.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'self'"

// RouterOption configures NewRouter.
type RouterOption func(*routerOptions)

type routerOptions struct {
	signer       *Signer
	allowedHosts []string
}

// WithSigner makes the router sign and check browser sessions and order links with s. Without
// it a key made at start is used, and sessions and links end with the process.
func WithSigner(s *Signer) RouterOption { return func(o *routerOptions) { o.signer = s } }

// WithAllowedHosts answers only requests whose Host names one of hosts (see AllowedHosts);
// any other gets 421. Without it every Host is served.
func WithAllowedHosts(hosts []string) RouterOption {
	return func(o *routerOptions) { o.allowedHosts = hosts }
}

// NewRouter returns an Echo instance with the shop's common middleware and error handler.
// Route groups are mounted by the caller (cmd/shop), so what is served is visible in one place.
func NewRouter(logger *slog.Logger, reg prometheus.Registerer, opts ...RouterOption) *echo.Echo {
	var o routerOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.signer == nil {
		o.signer = NewRandomSigner()
	}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = ErrorHandler(logger)
	mw := []echo.MiddlewareFunc{
		RequestIDMiddleware(),
		LoggingMiddleware(logger),
		// Panics become errors (500) handled like any other; the request's idempotency key,
		// if any, is released by the idempotency middleware rather than left locked.
		middleware.RecoverWithConfig(middleware.RecoverConfig{DisableErrorHandler: true, DisablePrintStack: true}),
		MetricsMiddleware(reg),
	}
	mw = append(mw,
		middleware.BodyLimit(MaxBodyBytes),
		middleware.SecureWithConfig(middleware.SecureConfig{
			XSSProtection: "0", ContentTypeNosniff: "nosniff", XFrameOptions: "SAMEORIGIN",
			ReferrerPolicy: "same-origin", ContentSecurityPolicy: ContentSecurityPolicy,
		}),
		NoStore(),
	)
	if len(o.allowedHosts) > 0 {
		mw = append(mw, HostCheck(o.allowedHosts))
	}
	mw = append(mw,
		func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error { c.Set(ctxSigner, o.signer); return next(c) }
		},
		// Last of the router's middleware, so before any route's: the body is read and
		// checked before the idempotency middleware reserves a key.
		ValidText(),
	)
	e.Use(mw...)
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
