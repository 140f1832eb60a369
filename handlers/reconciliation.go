package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"checkoutlab/payments"
)

// Reconciler builds a tenant's reconciliation report. *payments.Reconciler is one.
type Reconciler interface {
	Report(ctx context.Context, tenantID string) (*payments.Report, error)
}

// ReconciliationAPI serves GET /api/v1/reconciliation.
type ReconciliationAPI struct {
	Reconciler Reconciler
}

// Routes mounts the report on an authenticated /api/v1 group.
func (h *ReconciliationAPI) Routes(g *echo.Group) {
	g.GET("/reconciliation", h.report).Name = "api.reconciliation"
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
