package handlers

import (
	"context"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
	"checkoutlab/web/layout"
	"checkoutlab/web/pages"
)

// DemoTools are the trainer's shortcuts around a demo: a button that puts the demo catalogue
// and stock back while everything keeps running, and /gateway, the operator bar's way to the
// fake gateway's page (another server, whose address only the wiring knows).
type DemoTools struct {
	// Reset restores the demo data; cmd/shop makes it from models.ResetDemo.
	Reset func(ctx context.Context) error
	// GatewayURL is the fake gateway's base URL, as a browser reaches it.
	GatewayURL string
	// GatewayToken is the gateway's control token, if it has one: /gateway then sends the
	// browser to the gateway's one-time login (/?token=…), so an operator of the shop is
	// one click from the gateway's page. That is why /gateway is an operator route.
	GatewayToken string
}

// Route names, for c.Echo().Reverse.
const (
	routeResetDemo     = "ops.reset_demo"
	routeResetDemoPost = "ops.reset_demo.post"
)

// Routes mounts GET /gateway and GET/POST /ops/reset-demo (the POST behind CSRF, as every
// state-changing form).
func (h *DemoTools) Routes(e *echo.Echo) {
	e.GET("/gateway", h.gateway).Name = "ops.gateway"
	g := e.Group("/ops/reset-demo", SessionMiddleware(), CSRF())
	g.GET("", h.resetPage).Name = routeResetDemo
	g.POST("", h.reset).Name = routeResetDemoPost
}

// gateway sends the browser to the fake gateway's page, logged in with GatewayToken; 404 when
// the shop does not know the gateway.
func (h *DemoTools) gateway(c echo.Context) error {
	if h.GatewayURL == "" {
		return models.Errorf(models.KindNotFound, models.ErrNotFound.Code, "this shop has no gateway page to show")
	}
	target := h.GatewayURL + "/"
	if h.GatewayToken != "" {
		target += "?token=" + url.QueryEscape(h.GatewayToken)
	}
	return c.Redirect(http.StatusSeeOther, target)
}

func (h *DemoTools) resetPage(c echo.Context) error {
	vm := pages.ResetDemoPage{Layout: layout.Page{Title: "Reset demo data"}, CSRF: CSRFToken(c),
		Action: c.Echo().Reverse(routeResetDemoPost), Done: c.QueryParam("done") == "1"}
	return render(c, http.StatusOK, pages.ResetDemo(vm))
}

// reset restores the demo data and answers 303 to the page, which then confirms it.
func (h *DemoTools) reset(c echo.Context) error {
	if err := h.Reset(c.Request().Context()); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, c.Echo().Reverse(routeResetDemo)+"?done=1")
}
