package fakegateway

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// Handler returns the gateway's HTTP handler: the provider API under /v1, the control API
// under /_control and the page at / (both behind Config.ControlToken when set), and /healthz.
// A cross-origin browser request that changes something is refused with 403 everywhere.
// Mount it at the root of its own listener.
func (g *Gateway) Handler() http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = g.handleError
	e.Pre(traceRequests) // one span per request, around all the rest (tracing.go)
	e.Use(g.logRequests)

	v1 := e.Group("/v1")
	v1.POST("/charges", g.createCharge).Name = "charges.create"
	v1.GET("/charges", g.listCharges).Name = "charges.list"
	v1.GET("/charges/:id", g.getCharge).Name = "charges.get"
	v1.POST("/charges/:id/refunds", g.refundCharge).Name = "charges.refund"
	v1.POST("/payment_methods", g.createPaymentMethod).Name = "payment_methods.create"

	ctl := e.Group("/_control", g.requireControl)
	ctl.GET("/ledger", g.ledger).Name = "control.ledger"
	ctl.GET("/faults", g.listFaults).Name = "control.faults.list"
	ctl.POST("/faults", g.postFault).Name = "control.faults.arm"
	ctl.DELETE("/faults", g.deleteFaults).Name = "control.faults.disarm"
	// HTML forms cannot send DELETE; the page posts here instead.
	ctl.POST("/faults/disarm", g.deleteFaults).Name = "control.faults.disarm_form"
	ctl.DELETE("/faults/:id", g.deleteFault).Name = "control.fault.disarm"
	ctl.POST("/faults/:id/disarm", g.deleteFault).Name = "control.fault.disarm_form"
	ctl.GET("/deliveries", g.listDeliveries).Name = "control.deliveries"
	ctl.POST("/events/:id/resend", g.postResend).Name = "control.events.resend"

	e.GET("/", g.page, g.requirePage).Name = "page"
	e.GET("/healthz", g.healthz).Name = "healthz"
	return refuseCrossOrigin(e)
}

// healthz answers 200 {"status":"ok"} while the gateway's database answers, and 503
// otherwise. It needs no token, so a container's health check can call it.
func (g *Gateway) healthz(c echo.Context) error {
	sqlDB, err := g.db.DB()
	if err == nil {
		err = sqlDB.PingContext(c.Request().Context())
	}
	if err != nil {
		g.log.WarnContext(c.Request().Context(), "health check: database does not answer", "err", err)
		return &apiError{Status: http.StatusServiceUnavailable, Code: "database_unavailable", Message: "the gateway's database does not answer"}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// logRequests logs one line per request: method, route, status and duration. It logs no
// bodies, so no card number can reach the log.
func (g *Gateway) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		g.log.LogAttrs(context.Background(), levelFor(c.Request().Method, c.Response().Status), "request",
			slogAttrs(c, time.Since(start))...)
		return nil
	}
}

// sleep waits d, or less if the client leaves or the gateway closes. It reports whether the
// whole d passed.
func (g *Gateway) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-g.closing:
		return false
	}
}
