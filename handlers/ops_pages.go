package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"checkoutlab/handlers/idempotency"
	"checkoutlab/models"
	"checkoutlab/payments"
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

// DecisionLister lists the triage desk's latest decisions. *models.DecisionStore is one.
type DecisionLister interface {
	List(ctx context.Context, tenantID string, limit int) ([]models.Decision, error)
}

// OpsPages are the pages a trainer shows next to the shop: the mailbox where receipts land,
// and the reconciliation report as HTML with the triage desk — an action form on each finding
// and the decisions taken. They show every tenant's customers, so cmd/shop mounts them behind
// the operator login (OpsAuth.Guard over OperatorRoutes).
type OpsPages struct {
	Mailbox    MailboxReader
	Reconciler Reconciler
	Tenants    TenantLister
	// Desk, Decisions and Idempotency make the reconciliation page a triage desk; without
	// them it is read-only.
	Desk        TriageDesk
	Decisions   DecisionLister
	Idempotency *idempotency.Middleware
	// OrderLink is the path of an order's page that opens for an operator: the signed link of
	// the order's receipt (Signer.OrderLink), since an order's page opens only for the
	// session that placed it or with that link. Nil links to the bare /orders/{id}.
	OrderLink func(orderID string) string
}

// orderURL is where the pages link an order to.
func (h *OpsPages) orderURL(orderID string) string {
	if h.OrderLink == nil {
		return "/orders/" + url.PathEscape(orderID)
	}
	return h.OrderLink(orderID)
}

// Routes mounts /mailbox and /reconciliation (and its forms' POST /reconciliation/actions).
func (h *OpsPages) Routes(e *echo.Echo) {
	session, csrf := SessionMiddleware(), CSRF()
	e.GET("/mailbox", h.mailbox).Name = "ops.mailbox"
	e.GET("/reconciliation", h.reconciliation, session, csrf).Name = "ops.reconciliation"
	if h.Desk != nil {
		if h.Idempotency == nil || h.Decisions == nil {
			panic("handlers: OpsPages.Desk needs Decisions and its idempotency middleware")
		}
		e.POST("/reconciliation/actions", h.presentAction, session, csrf).Name = "ops.reconciliation.actions"
	}
}

// act is the operation behind the page's presenter: exactly the API's.
func (h *OpsPages) act(c echo.Context) error { return runAction(c, h.Desk) }

func (h *OpsPages) mailbox(c echo.Context) error {
	ms, err := h.Mailbox.Mailbox(c.Request().Context(), c.QueryParam("tenant"), 200)
	if err != nil {
		return err
	}
	vm := pages.MailboxPage{Layout: layout.Page{Title: "Mailbox"}}
	for _, m := range ms {
		vm.Messages = append(vm.Messages, pages.MailMessage{To: m.ToAddress, Subject: m.Subject, Body: m.Body,
			Sent: m.CreatedAt.UTC().Format("2 Jan 15:04:05 UTC"), Tenant: m.TenantID, OrderURL: h.orderURL(m.OrderID)})
	}
	return render(c, http.StatusOK, pages.Mailbox(vm))
}

func (h *OpsPages) reconciliation(c echo.Context) error {
	tenant := c.QueryParam("tenant")
	if tenant == "" {
		tenant = "acme"
	}
	var banner *actionBanner
	if id := c.QueryParam("decision"); id != "" {
		banner = &actionBanner{ok: true, message: "Done: the decision is recorded below and in the order's journal."}
	}
	return h.renderReconciliation(c, tenant, http.StatusOK, banner)
}

// tenant returns the tenant called id, or not_found.
func (h *OpsPages) tenant(ctx context.Context, id string) (*models.Tenant, error) {
	ts, err := h.Tenants.List(ctx)
	if err != nil {
		return nil, err
	}
	for i := range ts {
		if ts[i].ID == id {
			return &ts[i], nil
		}
	}
	return nil, models.Errorf(models.KindNotFound, models.ErrNotFound.Code, "no tenant %q", id)
}

// renderReconciliation renders the tenant's report with status, the action forms on each
// finding, the decisions (the one named by ?decision= marked) and banner, if any.
func (h *OpsPages) renderReconciliation(c echo.Context, tenant string, status int, banner *actionBanner) error {
	ctx := c.Request().Context()
	ts, err := h.Tenants.List(ctx)
	if err != nil {
		return err
	}
	vm := pages.ReconciliationPage{Layout: layout.Page{Title: "Reconciliation"}, Tenant: tenant,
		JSONURL: "GET /api/v1/reconciliation", ActionURL: "/reconciliation/actions", CSRF: CSRFToken(c)}
	known := false
	for _, t := range ts {
		vm.Tenants = append(vm.Tenants, t.ID)
		known = known || t.ID == tenant
	}
	if !known {
		return models.Errorf(models.KindNotFound, models.ErrNotFound.Code, "no tenant %q", tenant)
	}
	if banner != nil {
		vm.Banner = &pages.Banner{OK: banner.ok, Message: banner.message}
	}
	rep, err := h.Reconciler.Report(ctx, tenant)
	if err != nil {
		return err
	}
	vm.Clean = rep.Clean()
	vm.Counts = []pages.Fact{{Label: "Orders", Value: strconv.Itoa(rep.Orders)}, {Label: "Paid orders", Value: strconv.Itoa(rep.PaidOrders)},
		{Label: "Succeeded charges", Value: strconv.Itoa(rep.SucceededCharges)}}
	desk := h.Desk != nil
	finding := func(text, orderID string, actions ...pages.ActionForm) pages.Finding {
		f := pages.Finding{Text: text, OrderID: orderID}
		if desk && orderID != "" {
			for _, a := range actions {
				a.OrderID, a.IdempotencyKey = orderID, models.NewID("ops")
				f.Actions = append(f.Actions, a)
			}
		}
		return f
	}
	var (
		checkNow = pages.ActionForm{Action: models.ActionCheckNow, Label: "Check the gateway now"}
		refund   = pages.ActionForm{Action: models.ActionRefundExtraCharge, Label: "Refund the extra charge"}
		resume   = pages.ActionForm{Action: models.ActionSettleStuck, Outcome: payments.SettleResume, Label: "Resume it now"}
		fail     = pages.ActionForm{Action: models.ActionSettleStuck, Outcome: payments.SettleFailed, Label: "Mark failed, give the stock back"}
		dismiss  = pages.ActionForm{Action: models.ActionDismissDuplicate, Label: "A real second purchase"}
	)
	var doubles, withoutCharge, dups, unresolved, stale, mismatches, notPaid, conflicts, strays []pages.Finding
	for _, d := range rep.DoubleChargedOrders {
		doubles = append(doubles, finding(fmt.Sprintf("%s: %d charges %v", d.OrderID, len(d.Charges), d.Charges), d.OrderID, refund, checkNow))
	}
	for _, id := range rep.ChargesWithoutOrder {
		strays = append(strays, finding(id, ""))
	}
	for _, id := range rep.PaidOrdersWithoutCharge {
		withoutCharge = append(withoutCharge, finding(id, id, checkNow))
	}
	for _, d := range rep.DuplicateSideEffects {
		dups = append(dups, finding(fmt.Sprintf("%s: %d receipts, %d shipments", d.OrderID, d.Receipts, d.Shipments), d.OrderID))
	}
	for _, u := range rep.UnresolvedPayments {
		unresolved = append(unresolved, finding(fmt.Sprintf("%s (order %s) pending since %s", u.PaymentID, u.OrderID, u.Since.UTC().Format("15:04:05")), u.OrderID, checkNow, resume, fail))
	}
	for _, o := range rep.StaleOperations {
		orderID := ""
		if o.OrderID != nil {
			orderID = *o.OrderID
		}
		stale = append(stale, finding(fmt.Sprintf("key %q on %s, at %s, untouched since %s", o.Key, o.Endpoint, o.RecoveryPoint, o.Since.UTC().Format("15:04:05")), orderID, resume, fail))
	}
	for _, m := range rep.AmountMismatches {
		mismatches = append(mismatches, finding(fmt.Sprintf("%s (%s) for %d %s on order %s, whose payment is for %d %s", m.ChargeID, m.Status, m.ChargeAmount, m.ChargeCurrency, m.OrderID, m.Amount, m.Currency), m.OrderID, refund, checkNow))
	}
	for _, ch := range rep.ChargedButNotPaid {
		notPaid = append(notPaid, finding(fmt.Sprintf("%s (%d %s) on order %s, which is not paid", ch.ChargeID, ch.Amount, ch.Currency, ch.OrderID), ch.OrderID, checkNow, refund))
	}
	for _, w := range rep.WebhookConflicts {
		conflicts = append(conflicts, finding(fmt.Sprintf("%s (%s for %s) on order %s, at %s", w.EventID, w.Type, w.ChargeID, w.OrderID, w.At.UTC().Format("15:04:05")), w.OrderID, checkNow))
	}
	for _, d := range rep.SuspectedDuplicatePurchases {
		for i, id := range d.OrderIDs {
			text := fmt.Sprintf("%s: the same lines as %s, by the same customer, %d %s, placed %s", id, d.OrderIDs[0], d.Amount, d.Currency, d.First.UTC().Format("15:04:05"))
			if i == 0 {
				text = fmt.Sprintf("%s: first of %d, %d %s", id, len(d.OrderIDs), d.Amount, d.Currency)
				vm.Review = append(vm.Review, finding(text, ""))
				continue
			}
			vm.Review = append(vm.Review, finding(text, id, dismiss))
		}
	}
	vm.Checks = []pages.Check{
		{Name: "No double charge", Meaning: "every order has at most one succeeded charge at the gateway", Items: doubles},
		{Name: "No charge without an order", Meaning: "every succeeded charge belongs to an order of ours", Items: strays},
		{Name: "No paid order without a charge", Meaning: "every paid order has its succeeded charge", Items: withoutCharge},
		{Name: "No duplicate side effect", Meaning: "one receipt and one shipment per paid order", Items: dups},
		{Name: "No unresolved payment", Meaning: "no payment has stayed unknown longer than a lease and a completer pass", Items: unresolved},
		{Name: "No stale operation", Meaning: "no idempotency key has stayed in progress, untouched, longer than that", Items: stale},
		{Name: "No amount mismatch", Meaning: "every charge that names one of our payments is for its amount and currency", Items: mismatches},
		{Name: "No charge on an unpaid order", Meaning: "every succeeded charge of an order has made it paid", Items: notPaid},
		{Name: "No webhook conflict", Meaning: "no webhook-id came back with another payload", Items: conflicts},
	}
	if h.Decisions != nil {
		ds, err := h.Decisions.List(ctx, tenant, 50)
		if err != nil {
			return err
		}
		for _, d := range ds {
			vm.Decisions = append(vm.Decisions, pages.DecisionRow{ID: d.ID, At: d.CreatedAt.UTC().Format("2 Jan 15:04:05"),
				Who: d.Who, OrderID: d.OrderID, OrderURL: h.orderURL(d.OrderID), Action: d.Action, Findings: d.Findings,
				Gateway: d.Gateway, Result: d.Result, Detail: d.Detail, Reason: d.Reason, Marked: d.ID == c.QueryParam("decision")})
		}
	}
	return render(c, status, pages.Reconciliation(vm))
}
