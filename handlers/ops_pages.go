package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
	"checkoutlab/web/layout"
	"checkoutlab/web/pages"
)

// MailboxReader lists sent e-mails.
type MailboxReader interface {
	Mailbox(ctx context.Context, tenantID string, limit int) ([]models.MailboxMessage, error)
}

// TenantLister lists the tenants.
type TenantLister interface {
	List(ctx context.Context) ([]models.Tenant, error)
}

// OpsPages are the pages a trainer shows next to the shop: the mailbox where receipts land,
// and the reconciliation report as HTML. They are part of a local demo and need no login;
// a real shop would put them behind its staff authentication.
type OpsPages struct {
	Mailbox    MailboxReader
	Reconciler Reconciler
	Tenants    TenantLister
}

// Routes mounts /mailbox and /reconciliation.
func (h *OpsPages) Routes(e *echo.Echo) {
	e.GET("/mailbox", h.mailbox).Name = "ops.mailbox"
	e.GET("/reconciliation", h.reconciliation).Name = "ops.reconciliation"
}

func (h *OpsPages) mailbox(c echo.Context) error {
	ms, err := h.Mailbox.Mailbox(c.Request().Context(), c.QueryParam("tenant"), 200)
	if err != nil {
		return err
	}
	vm := pages.MailboxPage{Layout: layout.Page{Title: "Mailbox"}}
	for _, m := range ms {
		vm.Messages = append(vm.Messages, pages.MailMessage{To: m.ToAddress, Subject: m.Subject, Body: m.Body,
			Sent: m.CreatedAt.UTC().Format("2 Jan 15:04:05 UTC"), Tenant: m.TenantID, OrderURL: "/orders/" + m.OrderID})
	}
	return render(c, http.StatusOK, pages.Mailbox(vm))
}

func (h *OpsPages) reconciliation(c echo.Context) error {
	ctx := c.Request().Context()
	tenant := c.QueryParam("tenant")
	if tenant == "" {
		tenant = "acme"
	}
	ts, err := h.Tenants.List(ctx)
	if err != nil {
		return err
	}
	vm := pages.ReconciliationPage{Layout: layout.Page{Title: "Reconciliation"}, Tenant: tenant, JSONURL: "GET /api/v1/reconciliation"}
	known := false
	for _, t := range ts {
		vm.Tenants = append(vm.Tenants, t.ID)
		known = known || t.ID == tenant
	}
	if !known {
		return models.Errorf(models.KindNotFound, models.ErrNotFound.Code, "no tenant %q", tenant)
	}
	rep, err := h.Reconciler.Report(ctx, tenant)
	if err != nil {
		return err
	}
	vm.Counts = []pages.Fact{{Label: "Orders", Value: strconv.Itoa(rep.Orders)}, {Label: "Paid orders", Value: strconv.Itoa(rep.PaidOrders)},
		{Label: "Succeeded charges", Value: strconv.Itoa(rep.SucceededCharges)}}
	doubles := make([]string, 0, len(rep.DoubleChargedOrders))
	for _, d := range rep.DoubleChargedOrders {
		doubles = append(doubles, fmt.Sprintf("%s: %d charges %v", d.OrderID, len(d.Charges), d.Charges))
	}
	dups := make([]string, 0, len(rep.DuplicateSideEffects))
	for _, d := range rep.DuplicateSideEffects {
		dups = append(dups, fmt.Sprintf("%s: %d receipts, %d shipments", d.OrderID, d.Receipts, d.Shipments))
	}
	unresolved := make([]string, 0, len(rep.UnresolvedPayments))
	for _, u := range rep.UnresolvedPayments {
		unresolved = append(unresolved, fmt.Sprintf("%s (order %s) pending since %s", u.PaymentID, u.OrderID, u.Since.UTC().Format("15:04:05")))
	}
	stale := make([]string, 0, len(rep.StaleOperations))
	for _, o := range rep.StaleOperations {
		stale = append(stale, fmt.Sprintf("key %q on %s, at %s, untouched since %s", o.Key, o.Endpoint, o.RecoveryPoint, o.Since.UTC().Format("15:04:05")))
	}
	vm.Checks = []pages.Check{
		{Name: "No double charge", Meaning: "every order has at most one succeeded charge at the gateway", Items: doubles},
		{Name: "No charge without an order", Meaning: "every succeeded charge belongs to an order of ours", Items: rep.ChargesWithoutOrder},
		{Name: "No paid order without a charge", Meaning: "every paid order has its succeeded charge", Items: rep.PaidOrdersWithoutCharge},
		{Name: "No duplicate side effect", Meaning: "one receipt and one shipment per paid order", Items: dups},
		{Name: "No unresolved payment", Meaning: "no payment has stayed unknown longer than a lease and a completer pass", Items: unresolved},
		{Name: "No stale operation", Meaning: "no idempotency key has stayed in progress, untouched, longer than that", Items: stale},
	}
	return render(c, http.StatusOK, pages.Reconciliation(vm))
}
