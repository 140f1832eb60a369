package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"checkoutlab/handlers/idempotency"
	"checkoutlab/payments"
)

// Reconciler builds a tenant's reconciliation report. *payments.Reconciler is one.
type Reconciler interface {
	Report(ctx context.Context, tenantID string) (*payments.Report, error)
}

// ReconciliationAPI serves GET /api/v1/reconciliation and, with a Desk, the triage actions
// POST /api/v1/reconciliation/actions.
type ReconciliationAPI struct {
	Reconciler Reconciler
	Desk       TriageDesk
	// Idempotency keeps the actions safe to retry, as every POST of the API.
	Idempotency *idempotency.Middleware
}

// Routes mounts the report (and the actions) on an authenticated /api/v1 group. It panics if
// a Desk comes without its idempotency middleware: a refund endpoint without it could be
// taken twice by one retry.
func (h *ReconciliationAPI) Routes(g *echo.Group) {
	g.GET("/reconciliation", h.report).Name = "api.reconciliation"
	if h.Desk != nil {
		if h.Idempotency == nil {
			panic("handlers: ReconciliationAPI.Desk needs its idempotency middleware")
		}
		g.POST("/reconciliation/actions", h.act, h.Idempotency.Route(decodeAction)).Name = "api.reconciliation.actions"
	}
}

// report answers 200 with the report, or 503 gateway_unavailable when the gateway's ledger
// cannot be read (a report without it would claim a safety it cannot check).
func (h *ReconciliationAPI) report(c echo.Context) error {
	rep, err := h.Reconciler.Report(c.Request().Context(), TenantOf(c).ID)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, rep)
}

// act runs one triage action (see runAction).
func (h *ReconciliationAPI) act(c echo.Context) error { return runAction(c, h.Desk) }
