package handlers

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
	"checkoutlab/web/pages"
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
// the call) is derived from the key, so idempotency keys are scoped to it. Found tenants are
// remembered by API-key hash for TenantCacheTTL (tenant_cache.go).
func APIKeyAuth(tenants TenantFinder) echo.MiddlewareFunc {
	tenants = newTenantCache(tenants, TenantCacheTTL)
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
// order history, order pages and browser idempotency keys belong to the session.
//
// The cookie is the id and its signature (the router's Signer), so only ids this shop made
// are accepted: a visitor cannot pick a session id (and so cannot plant one in someone
// else's browser and watch what it does, "session fixation"). A cookie that does not verify
// is replaced by a new session.
func SessionMiddleware() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			signer, err := signerOf(c)
			if err != nil {
				return err
			}
			id := ""
			if ck, err := c.Cookie(SessionCookie); err == nil {
				id = signer.sessionID(ck.Value)
			}
			if id == "" {
				id = randomHex(16)
				c.SetCookie(&http.Cookie{Name: SessionCookie, Value: id + "." + signer.Sign(signSession, id), Path: "/",
					HttpOnly: true, SameSite: http.SameSiteLaxMode, MaxAge: 30 * 24 * 3600})
			}
			c.Set(ctxSession, id)
			c.Set(ctxPrincipal, "session:"+id)
			return next(c)
		}
	}
}

// SessionOf returns the browser session id.
func SessionOf(c echo.Context) string { s, _ := c.Get(ctxSession).(string); return s }

// sessionID returns the id a session cookie carries if its signature holds, else "".
func (s *Signer) sessionID(cookie string) string {
	id, sig, ok := strings.Cut(cookie, ".")
	if !ok || !validSessionID(id) || !s.Valid(signSession, id, sig) {
		return ""
	}
	return id
}

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

// methodLabel bounds the method label of the request metrics: the methods of HTTP itself keep
// their name, any other is "other". A client can send any token as a method, and each new
// label value would be a new time series, kept for ever.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}

// NoStore marks every answer outside /static as not to be stored by the browser or a proxy:
// pages show a cart, an address, an order; API answers carry the same. Static files may be
// cached. A handler that sets its own Cache-Control keeps it.
func NoStore() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !strings.HasPrefix(c.Request().URL.Path, "/static/") {
				c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
			}
			return next(c)
		}
	}
}

// AllowedHosts is the host names a shop answers to: the host of its public URL, the host of
// its listen address (unless it listens on every interface), and the loopback names, so that
// a developer's http://localhost:8080 keeps working. Ports are not compared.
func AllowedHosts(publicURL, listenAddr string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if u, err := url.Parse(publicURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, u.Hostname())
	}
	if h, _, err := net.SplitHostPort(listenAddr); err == nil && h != "" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
			hosts = append(hosts, h)
		}
	}
	for i, h := range hosts {
		hosts[i] = strings.ToLower(h)
	}
	return hosts
}

// ErrUnknownHost answers a request whose Host is not one of the shop's names.
var ErrUnknownHost = models.ErrMisdirectedRequest

// HostCheck answers 421 misdirected_request to a request whose Host header names none of
// hosts. A page served under a name the shop does not know — a DNS rebinding attack points an
// attacker's name at 127.0.0.1 — would otherwise run the attacker's script against the shop
// as if it were its own origin.
func HostCheck(hosts []string) echo.MiddlewareFunc {
	allowed := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		allowed[strings.ToLower(strings.Trim(h, "[]"))] = true
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			host := c.Request().Host
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
			if !allowed[host] {
				return answerError(c, http.StatusMisdirectedRequest, ErrUnknownHost)
			}
			return next(c)
		}
	}
}

// ErrBadText is the answer to a NUL byte or invalid UTF-8 anywhere a request carries text.
var ErrBadText = models.ErrInvalid.Msgf("the request contains a NUL byte or text that is not valid UTF-8")

// ErrRequestTimeout answers a client that did not send its body within the server's read
// timeout.
var ErrRequestTimeout = models.ErrRequestTimeout

// ValidText refuses, with 400 invalid_request, a request that carries a NUL byte or invalid
// UTF-8 in its path, a query parameter, or its body (every string of a JSON body, every
// field of a form), before any handler or idempotency middleware runs: nothing is written,
// no key is reserved. PostgreSQL cannot store either in a text column (SQLSTATE 22021) and
// SQLite would store bytes no page can show, so they are refused at the door on both.
//
// It reads the whole body (the body limit bounds it) and hands the handler a copy. A client
// that stalls its body past the server's read timeout gets 408 request_timeout here, rather
// than a handler mistaking the dead connection for a database that went away.
func ValidText() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if !cleanText(r.URL.Path) {
				return badText("path")
			}
			if r.URL.RawQuery != "" {
				q, _ := url.ParseQuery(r.URL.RawQuery) // what parses is what a handler can read
				if !cleanText(r.URL.RawQuery) || !cleanValues(q) {
					return badText("query")
				}
			}
			if r.Body == nil || r.Body == http.NoBody {
				return next(c)
			}
			body, err := io.ReadAll(r.Body)
			if err != nil {
				var he *echo.HTTPError
				var ne net.Error
				switch {
				case errors.As(err, &he):
					return err // the body limit's 413
				case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
					return answerError(c, http.StatusRequestTimeout, ErrRequestTimeout)
				}
				return models.ErrUnreadableBody.Wrap(err)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if !cleanBody(r.Header.Get(echo.HeaderContentType), body) {
				return badText("body")
			}
			return next(c)
		}
	}
}

func badText(where string) error {
	return &models.Error{Kind: ErrBadText.Kind, Code: ErrBadText.Code, Message: ErrBadText.Message,
		Fields: map[string]string{where: "contains a NUL byte or invalid UTF-8"}}
}

// cleanText reports whether s is valid UTF-8 without a NUL.
func cleanText[T string | []byte](s T) bool {
	return utf8.Valid([]byte(s)) && !bytes.ContainsRune([]byte(s), 0)
}

func cleanValues(v url.Values) bool {
	for k, vs := range v {
		if !cleanText(k) {
			return false
		}
		for _, s := range vs {
			if !cleanText(s) {
				return false
			}
		}
	}
	return true
}

// cleanBody checks a body as its handler will read it: a form's decoded fields, a multipart
// form's parts, any other body as text and, if it is JSON, every decoded string ("\u0000"
// is a NUL once decoded).
func cleanBody(contentType string, body []byte) bool {
	mediaType, params, _ := mime.ParseMediaType(contentType)
	switch {
	case mediaType == echo.MIMEApplicationForm:
		v, _ := url.ParseQuery(string(body))
		return cleanText(body) && cleanValues(v)
	case strings.HasPrefix(mediaType, "multipart/"):
		return cleanMultipart(body, params["boundary"])
	}
	if !cleanText(body) {
		return false
	}
	if !json.Valid(body) {
		return true // not JSON: the handler answers its own invalid_json
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	return dec.Decode(&v) != nil || cleanJSON(v)
}

func cleanJSON(v any) bool {
	switch v := v.(type) {
	case string:
		return !strings.ContainsRune(v, 0)
	case []any:
		for _, e := range v {
			if !cleanJSON(e) {
				return false
			}
		}
	case map[string]any:
		for k, e := range v {
			if strings.ContainsRune(k, 0) || !cleanJSON(e) {
				return false
			}
		}
	}
	return true
}

func cleanMultipart(body []byte, boundary string) bool {
	if boundary == "" {
		return cleanText(body)
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		p, err := mr.NextPart()
		if err != nil {
			return true // the end, or a form no handler can parse either
		}
		b, err := io.ReadAll(p)
		if err != nil {
			return true
		}
		if !cleanText(p.FormName()) || !cleanText(p.FileName()) || !cleanText(b) {
			return false
		}
	}
}

// answerError writes err with status straight away, as the error handler would for a status it
// has no kind for (408, 421): JSON for API clients and anything that does not ask for HTML,
// the error page for a browser.
func answerError(c echo.Context, status int, err *models.Error) error {
	if c.Request().Method == http.MethodHead {
		return c.NoContent(status)
	}
	if WantsJSON(c) || !acceptsHTML(c) {
		_, body := ErrorBody(err)
		return writeJSON(c, status, body)
	}
	return render(c, status, pages.Error(pages.ErrorPage{Status: status, Title: http.StatusText(status),
		Message: err.Message, RequestID: RequestID(c)}))
}

// acceptsHTML reports whether the client asks for a page: a browser navigating or posting a form.
func acceptsHTML(c echo.Context) bool {
	return strings.Contains(c.Request().Header.Get(echo.HeaderAccept), echo.MIMETextHTML)
}
