package fakegateway

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// DemoControlToken is the documented demo value of GATEWAY_CONTROL_TOKEN, shared by the shop,
// the failure lab and cmd/fakegateway when nothing else is configured. It is public: anyone
// who can reach a gateway using it can arm faults and refund charges. Set your own token
// anywhere but on your own machine.
const DemoControlToken = "gwctl_demo_checkoutlab_0000"

// minControlTokenLen keeps a control token long enough not to be guessed by trying.
const minControlTokenLen = 16

// sessionCookie is the page's session: a random nonce and its HMAC. The name is the gateway's
// own: browsers keep cookies per host, not per port, so the shop on the same host must not
// see a cookie it could mistake for its own, nor overwrite this one.
const sessionCookie = "fakegateway_session"

// csrfField is the hidden form field (or the X-CSRF-Token header) that carries the CSRF token;
// csrfContextKey is where requirePage leaves the token for the page to render.
const (
	csrfField      = "_csrf"
	csrfContextKey = "fakegateway.csrf"
)

// checkControlToken refuses a token that is too short to be secret or that needs escaping in
// a URL: the page's login link carries it as /?token=….
func checkControlToken(token string) error {
	if len(token) < minControlTokenLen {
		return fmt.Errorf("fakegateway: the control token must be at least %d characters", minControlTokenLen)
	}
	for _, r := range token {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~", r)) {
			return fmt.Errorf("fakegateway: the control token may hold only letters, digits and - . _ ~")
		}
	}
	return nil
}

// newSessionKey returns the key that signs session cookies and CSRF tokens. With a control
// token the key is derived from it, so a browser stays logged in across a restart and is
// logged out when the token changes. Without one there is nothing to derive from, and a
// random key per process is enough for CSRF: after a restart the page is reloaded once.
func newSessionKey(controlToken string) []byte {
	if controlToken == "" {
		return []byte(rand.Text())
	}
	mac := hmac.New(sha256.New, []byte(controlToken))
	mac.Write([]byte("fakegateway page session key"))
	return mac.Sum(nil)
}

func (g *Gateway) sign(purpose, nonce string) string {
	mac := hmac.New(sha256.New, g.sessionKey)
	mac.Write([]byte(purpose + ":" + nonce))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// session returns the nonce of the request's session cookie when its signature holds.
func (g *Gateway) session(r *http.Request) (string, bool) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", false
	}
	nonce, sig, ok := strings.Cut(ck.Value, ".")
	if !ok || nonce == "" || !hmac.Equal([]byte(sig), []byte(g.sign("session", nonce))) {
		return "", false
	}
	return nonce, true
}

// startSession sets a new session cookie and returns its nonce. HttpOnly keeps it from
// scripts; SameSite=Lax keeps it off cross-site form posts while a link from elsewhere (the
// shop's lab page) still opens the page logged in.
func (g *Gateway) startSession(c echo.Context) string {
	nonce := rand.Text()
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: nonce + "." + g.sign("session", nonce),
		Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	return nonce
}

// csrfToken is the token the page's forms carry: tied to the session, so a page that cannot
// read the HttpOnly cookie cannot make one.
func (g *Gateway) csrfToken(nonce string) string { return g.sign("csrf", nonce) }

// bearer reports whether the request carries an Authorization header, and whether it is
// "Bearer <the control token>".
func (g *Gateway) bearer(r *http.Request) (present, valid bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return false, false
	}
	scheme, token, _ := strings.Cut(h, " ")
	valid = strings.EqualFold(scheme, "Bearer") &&
		subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(g.cfg.ControlToken)) == 1
	return true, valid
}

func unauthorized(message string) *apiError {
	return &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: message}
}

func csrfFailed() *apiError {
	return &apiError{Status: http.StatusForbidden, Code: "csrf_failed",
		Message: "the form's CSRF token is missing or out of date: reload the gateway's page and try again"}
}

// requireControl guards /_control/*. A client authenticates with
// "Authorization: Bearer <control token>"; a browser with the session the page's login set,
// and then every request that changes something also carries the CSRF token of that session.
// A form post always needs the CSRF token, even when no control token is configured and the
// control API is otherwise open: that is what stops another site's form from arming faults
// in the browser of someone who has the page open.
func (g *Gateway) requireControl(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if present, valid := g.bearer(r); present {
			if g.cfg.ControlToken != "" && !valid {
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="fakegateway control"`)
				return unauthorized("the control token is not valid")
			}
			// A browser never attaches an Authorization header to a forged request by
			// itself, so a request that carries one needs no CSRF token.
			return next(c)
		}
		nonce, hasSession := g.session(r)
		if g.cfg.ControlToken != "" && !hasSession {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="fakegateway control"`)
			return unauthorized("the control API needs the header Authorization: Bearer $GATEWAY_CONTROL_TOKEN, or a browser logged in at /?token=…")
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return next(c)
		}
		if form := isForm(c); hasSession || form {
			token := r.Header.Get("X-CSRF-Token")
			if token == "" && form {
				token = c.FormValue(csrfField)
			}
			if !hasSession || !hmac.Equal([]byte(token), []byte(g.csrfToken(nonce))) {
				return csrfFailed()
			}
		}
		return next(c)
	}
}

// requirePage guards GET /, the operator's page. With a control token, a browser logs in once
// with /?token=<control token>: the gateway sets the session cookie and redirects to / so the
// token does not stay in the address bar. Without a session the answer is 401 with a login
// form. Without a control token the page is open, and a visitor gets a session anyway because
// the page's forms need its CSRF token.
func (g *Gateway) requirePage(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		nonce, hasSession := g.session(r)
		if g.cfg.ControlToken == "" {
			if !hasSession {
				nonce = g.startSession(c)
			}
			c.Set(csrfContextKey, g.csrfToken(nonce))
			return next(c)
		}
		if token, ok := r.URL.Query()["token"]; ok {
			if subtle.ConstantTimeCompare([]byte(token[0]), []byte(g.cfg.ControlToken)) != 1 {
				return g.loginPage(c, true)
			}
			g.startSession(c)
			return c.Redirect(http.StatusSeeOther, "/")
		}
		if !hasSession {
			if _, valid := g.bearer(r); !valid {
				return g.loginPage(c, false)
			}
			// A script with the token (curl -H "Authorization: Bearer …" /) may read the page; it
			// gets a session so the forms it reads carry a working CSRF token.
			nonce = g.startSession(c)
		}
		c.Set(csrfContextKey, g.csrfToken(nonce))
		return next(c)
	}
}

var loginTemplate = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Fake gateway · log in</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; max-width: 40rem">
<h1>Fake payment gateway</h1>
<p>This page arms faults and shows every charge: it is an operator tool. Give the gateway's
control token (<code>GATEWAY_CONTROL_TOKEN</code>), or open the login link the gateway logs
at start (<code>/?token=…</code>).</p>
{{if .}}<p role="alert" data-testid="gateway-login-error">That is not the gateway's control token.</p>{{end}}
<form method="get" action="/" data-testid="gateway-login">
<label>Control token <input type="password" name="token" autocomplete="current-password" required></label>
<button type="submit">Log in</button>
</form>
</body>
</html>`))

// loginPage answers 401 with the login form; wrong says the token given was not the right one.
func (g *Gateway) loginPage(c echo.Context, wrong bool) error {
	var buf bytes.Buffer
	if err := loginTemplate.Execute(&buf, wrong); err != nil {
		return fmt.Errorf("render login page: %w", err)
	}
	c.Response().Header().Set("WWW-Authenticate", `Bearer realm="fakegateway control"`)
	return c.HTMLBlob(http.StatusUnauthorized, buf.Bytes())
}

// refuseCrossOrigin wraps the whole gateway in net/http's CrossOriginProtection: a browser
// request that changes something (POST, DELETE, …) and comes from another origin, as the
// browser reports it in Sec-Fetch-Site or Origin, is refused with 403 before any handler runs.
// It covers what a CSRF token cannot: a cross-site form posting a JSON body as text/plain to
// /_control/faults or /v1/charges/{id}/refunds, which carries no cookie and needs none while
// the control API is open. Servers (the shop's gateway client, curl) send neither header and
// pass.
func refuseCrossOrigin(h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(errorBody{Error: "csrf_failed",
			Message: "cross-origin requests that change something are refused"})
	}))
	return cop.Handler(h)
}
