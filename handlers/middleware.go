package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
)

// Keys under which middleware leaves values on the echo.Context.
const (
	ctxRequestID = "request_id"
	ctxTenant    = "tenant"
	ctxPrincipal = "principal"
	ctxSession   = "session_id"
)

// RequestIDMiddleware gives every request an id (or keeps a sane X-Request-Id from the client)
// and echoes it in the response, so a user's report can be matched to a log line.
func RequestIDMiddleware() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			id := c.Request().Header.Get(echo.HeaderXRequestID)
			if id == "" || len(id) > 64 || strings.ContainsFunc(id, func(r rune) bool { return r < '!' || r > '~' }) {
				id = randomHex(8)
			}
			c.Set(ctxRequestID, id)
			c.Response().Header().Set(echo.HeaderXRequestID, id)
			return next(c)
		}
	}
}

// RequestID returns the request's id.
func RequestID(c echo.Context) string { s, _ := c.Get(ctxRequestID).(string); return s }

// LoggingMiddleware writes one structured log line per request. It logs the path, never the
// body or query, so card numbers and e-mail addresses stay out of the logs.
func LoggingMiddleware(logger *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err) // let the error handler write the response now, so we log its status
			}
			attrs := []any{"request_id", RequestID(c), "method", c.Request().Method,
				"route", c.Path(), "status", c.Response().Status, "duration_ms", time.Since(start).Milliseconds()}
			if t := TenantOf(c); t != nil {
				attrs = append(attrs, "tenant", t.ID)
			}
			if key := c.Request().Header.Get("Idempotency-Key"); key != "" {
				attrs = append(attrs, "idempotency_key", key)
			}
			logger.LogAttrs(c.Request().Context(), slog.LevelInfo, "request", argsToAttrs(attrs)...)
			return nil
		}
	}
}

func argsToAttrs(args []any) []slog.Attr {
	attrs := make([]slog.Attr, 0, len(args)/2)
	for i := 0; i+1 < len(args); i += 2 {
		attrs = append(attrs, slog.Any(args[i].(string), args[i+1]))
	}
	return attrs
}

// TenantFinder is what authentication needs from the tenant store.
type TenantFinder interface {
	ByAPIKey(ctx context.Context, key string) (*models.Tenant, error)
}

// APIKeyAuth authenticates API calls with "Authorization: Bearer <api key>". The tenant comes
// from the credential, never from the request. The principal (who, within the tenant, made
// the call) is derived from the key, so idempotency keys are scoped to it.
func APIKeyAuth(tenants TenantFinder) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			auth := c.Request().Header.Get(echo.HeaderAuthorization)
			key, ok := strings.CutPrefix(auth, "Bearer ")
			key = strings.TrimSpace(key)
			if !ok || key == "" {
				return models.ErrUnauthorized
			}
			t, err := tenants.ByAPIKey(c.Request().Context(), key)
			if err != nil {
				return err
			}
			c.Set(ctxTenant, t)
			c.Set(ctxPrincipal, "api_key:"+models.HashAPIKey(key)[:16])
			return next(c)
		}
	}
}

// TenantOf returns the authenticated (API) or selected (storefront) tenant, or nil.
func TenantOf(c echo.Context) *models.Tenant { t, _ := c.Get(ctxTenant).(*models.Tenant); return t }

// PrincipalOf names who made the request within its tenant: an API key or a browser session.
func PrincipalOf(c echo.Context) string { p, _ := c.Get(ctxPrincipal).(string); return p }

// SessionCookie is the name of the browser session cookie.
const SessionCookie = "checkoutlab_session"

// SessionMiddleware gives every browser an anonymous session id in an HttpOnly cookie. Carts,
// order history and browser idempotency keys belong to the session.
func SessionMiddleware() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			id := ""
			if ck, err := c.Cookie(SessionCookie); err == nil && validSessionID(ck.Value) {
				id = ck.Value
			} else {
				id = randomHex(16)
				c.SetCookie(&http.Cookie{Name: SessionCookie, Value: id, Path: "/", HttpOnly: true,
					SameSite: http.SameSiteLaxMode, MaxAge: 30 * 24 * 3600})
			}
			c.Set(ctxSession, id)
			c.Set(ctxPrincipal, "session:"+id)
			return next(c)
		}
	}
}

// SessionOf returns the browser session id.
func SessionOf(c echo.Context) string { s, _ := c.Get(ctxSession).(string); return s }

func validSessionID(s string) bool {
	if len(s) != 32 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
