package handlers

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
	"checkoutlab/web/layout"
	"checkoutlab/web/pages"
)

// OpsCookie is the name of the operator session cookie.
const OpsCookie = "checkoutlab_ops"

// OperatorRoutes are the operator tools, for Guard: they show every tenant's customers, start
// whole shops (the lab), put the demo stock back (reset-demo) or log a browser in to the fake
// gateway's page (/gateway, whose redirect carries the gateway's control token).
var OperatorRoutes = []string{"/mailbox", "/reconciliation", "/lab", "/ops/reset-demo", "/gateway"}

// OpsSessionTTL is how long an operator stays logged in.
const OpsSessionTTL = 12 * time.Hour

// ErrOperatorLogin answers a request for an operator page without an operator session.
var ErrOperatorLogin = models.ErrOperatorLoginRequired

// OpsAuth is the operators' login. The mailbox, the reconciliation page and the failure lab
// show every tenant's customers, so they are for whoever holds the operator password:
// OPS_PASSWORD, or — so that `go run ./cmd/shop` needs no setup — a random one made at start,
// reached through the one-click link LoginURL gives for the log.
//
// Logging in sets a signed, HttpOnly operator cookie that expires after OpsSessionTTL. The
// cookie signs the password along with the expiry, so a new password (a restart without
// OPS_PASSWORD makes one) ends every operator session at once.
type OpsAuth struct {
	password string
	signer   *Signer
	// Generated is true when no password was configured and NewOpsAuth made one: the caller
	// then logs LoginURL, the only way in.
	Generated bool
	// Secure marks the cookie Secure; set it when the shop is served over https.
	Secure bool
}

// NewOpsAuth returns the operator login with password, or with a random one if password is
// empty. signer signs the operator cookie and the login token: the shop's own, so that
// operator sessions outlive a restart when OPS_PASSWORD is set; nil makes a key for this
// process only.
func NewOpsAuth(password string, signer *Signer) *OpsAuth {
	if signer == nil {
		signer = NewRandomSigner()
	}
	a := &OpsAuth{password: password, signer: signer}
	if password == "" {
		b := make([]byte, 18)
		_, _ = rand.Read(b)
		a.password, a.Generated = base64.RawURLEncoding.EncodeToString(b), true
	}
	return a
}

// LoginToken is the one-click login token: whoever holds it is an operator, exactly as with
// the password, which it is derived from. It changes when the password does.
func (a *OpsAuth) LoginToken() string { return a.signer.Sign(signOpsLogin, a.password) }

// LoginURL is the one-click login link on the shop at base (e.g. SHOP_PUBLIC_URL), for the log.
func (a *OpsAuth) LoginURL(base string) string {
	return strings.TrimRight(base, "/") + "/ops/login?token=" + url.QueryEscape(a.LoginToken())
}

// SessionCookie returns a fresh operator session cookie, for tools in the same process (the
// failure lab) and tests that act as an operator without going through the form.
func (a *OpsAuth) SessionCookie() *http.Cookie {
	expires := time.Now().Add(OpsSessionTTL)
	v := strconv.FormatInt(expires.Unix(), 10)
	return &http.Cookie{Name: OpsCookie, Value: v + "." + a.signer.Sign(signOpsSession, v+"|"+a.password),
		Path: "/", HttpOnly: true, Secure: a.Secure, SameSite: http.SameSiteLaxMode, Expires: expires}
}

// IsOperator reports whether the request carries a valid, unexpired operator session.
func (a *OpsAuth) IsOperator(c echo.Context) bool {
	ck, err := c.Cookie(OpsCookie)
	if err != nil {
		return false
	}
	v, sig, ok := strings.Cut(ck.Value, ".")
	if !ok || !a.signer.Valid(signOpsSession, v+"|"+a.password, sig) {
		return false
	}
	expires, err := strconv.ParseInt(v, 10, 64)
	return err == nil && time.Now().Unix() < expires
}

// Require lets operators through and turns everyone else away: a browser is sent (303) to
// the login form, which brings it back here afterwards; anything else — a script, a fetch, an
// htmx request — gets 401 operator_login_required as JSON (htmx with HX-Redirect to the form).
func (a *OpsAuth) Require() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if a.IsOperator(c) {
				return next(c)
			}
			login := "/ops/login"
			if m := c.Request().Method; m == http.MethodGet || m == http.MethodHead {
				// Back here afterwards, query and all: /reconciliation?tenant=globex stays on globex.
				login += "?next=" + url.QueryEscape(c.Request().URL.RequestURI())
			}
			if isHTMX(c) {
				c.Response().Header().Set("HX-Redirect", login)
			} else if acceptsHTML(c) && !WantsJSON(c) {
				return c.Redirect(http.StatusSeeOther, login)
			}
			_, body := ErrorBody(ErrOperatorLogin)
			return writeJSON(c, http.StatusUnauthorized, body)
		}
	}
}

// Guard is Require for the routes whose path is one of prefixes or lies under one (prefix
// "/lab" guards "/lab" and "/lab/runs/:id", not "/laboratory"). It matches the route that
// runs, not the raw URL, so no spelling of a path (escapes, double slashes) slips past; mount
// it with e.Use, where route groups owned by other handlers cannot each be given it.
func (a *OpsAuth) Guard(prefixes ...string) echo.MiddlewareFunc {
	require := a.Require()
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		guarded := require(next)
		return func(c echo.Context) error {
			route := c.Path()
			for _, p := range prefixes {
				if route == p || strings.HasPrefix(route, p+"/") {
					return guarded(c)
				}
			}
			return next(c)
		}
	}
}

// Routes mounts GET and POST /ops/login and POST /ops/logout, with CSRF protection.
func (a *OpsAuth) Routes(e *echo.Echo) {
	g := e.Group("/ops", CSRF())
	g.GET("/login", a.loginForm).Name = "ops.login"
	g.POST("/login", a.login).Name = "ops.login.post"
	g.POST("/logout", a.logout).Name = "ops.logout"
}

// loginForm shows the form; with ?token= it is the one-click login of the log's link.
func (a *OpsAuth) loginForm(c echo.Context) error {
	next := safeNext(c.QueryParam("next"))
	if token := c.QueryParam("token"); token != "" {
		if !equalSecret(token, a.LoginToken()) {
			return a.renderForm(c, http.StatusUnauthorized, next,
				"That login link is not valid. Without OPS_PASSWORD the shop makes a new one at each start: use the link from its latest log.")
		}
		c.SetCookie(a.SessionCookie())
		return c.Redirect(http.StatusSeeOther, next)
	}
	if a.IsOperator(c) {
		return c.Redirect(http.StatusSeeOther, next)
	}
	return a.renderForm(c, http.StatusOK, next, "")
}

func (a *OpsAuth) login(c echo.Context) error {
	next := safeNext(c.FormValue("next"))
	if !equalSecret(c.FormValue("password"), a.password) {
		return a.renderForm(c, http.StatusUnauthorized, next, "That is not the operator password.")
	}
	c.SetCookie(a.SessionCookie())
	return c.Redirect(http.StatusSeeOther, next)
}

func (a *OpsAuth) logout(c echo.Context) error {
	c.SetCookie(&http.Cookie{Name: OpsCookie, Value: "", Path: "/", HttpOnly: true, Secure: a.Secure, MaxAge: -1})
	return c.Redirect(http.StatusSeeOther, "/")
}

func (a *OpsAuth) renderForm(c echo.Context, status int, next, problem string) error {
	return render(c, status, pages.Login(pages.LoginPage{Layout: layout.Page{Title: "Operator login"},
		Action: "/ops/login", CSRF: CSRFToken(c), Next: next, Error: problem}))
}

// defaultOpsPage is where a login without a next page lands.
const defaultOpsPage = "/lab"

// safeNext returns next if it is a path on this site, else defaultOpsPage: a login link must
// never send an operator to another site ("/ops/login?next=//evil.example").
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") ||
		strings.HasPrefix(next, "/\\") || u.Scheme != "" || u.Host != "" || !cleanText(next) {
		return defaultOpsPage
	}
	return next
}

// equalSecret compares a given secret with the expected one in time that depends on neither.
func equalSecret(given, want string) bool {
	g, w := sha256.Sum256([]byte(given)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}
