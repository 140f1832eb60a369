package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
	"checkoutlab/payments"
	"checkoutlab/web/components"
	"checkoutlab/web/pages"
)

// order renders the confirmation of the order with the id in the path, for the browser
// session that placed it or for whoever holds the signed link of its receipt (see mayView).
// Anyone else, like an unknown id, gets the 404 page: the page shows a name, an address and
// an e-mail address, and an order id alone is not a secret (it is in logs, in the API, in a
// support ticket).
func (s *Storefront) order(c echo.Context) error {
	ctx := c.Request().Context()
	o, err := s.Orders.GetAnyTenant(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	if ok, err := mayView(c, o); err != nil {
		return err
	} else if !ok {
		return models.Errorf(models.KindNotFound, models.ErrNotFound.Code, "no order %q", c.Param("id"))
	}
	t, err := s.Tenants.Get(ctx, o.TenantID)
	if err != nil {
		return err
	}
	c.Set(ctxTenant, t)
	lay, err := s.layoutFor(c, t, "Order "+o.ID, -1)
	if err != nil {
		return err
	}
	status, class := orderStatus(o.Status)
	vm := pages.OrderPage{
		Layout: lay, ID: o.ID, Status: status, StatusClass: class, Email: o.Email,
		Placed:     o.CreatedAt.UTC().Format("2 January 2006, 15:04 UTC"),
		Subtotal:   components.Money(o.SubtotalAmount, o.Currency),
		Shipping:   shippingPrice(o.ShippingAmount, o.Currency),
		ShipMethod: shippingLabel(o.ShippingMethod),
		Total:      components.Money(o.Amount, o.Currency),
		AddressLines: []string{o.ShippingName, o.ShippingAddress,
			strings.TrimSpace(o.ShippingPostalCode + " " + o.ShippingCity), components.CountryName(o.ShippingCountry)},
		ShopURL: lay.StorePath, OrdersURL: pathFor(c, routeOrders, t.ID),
	}
	for _, l := range o.Lines {
		vm.Lines = append(vm.Lines, pages.SummaryLine{Name: l.Name, Quantity: l.Quantity, Amount: components.Money(l.Amount, o.Currency)})
	}
	for _, p := range o.Payments {
		vm.Payments = append(vm.Payments, pages.Payment{Status: paymentStatus(p), Amount: components.Money(p.Amount, p.Currency),
			Card: strings.TrimSpace(p.CardBrand + " •••• " + p.CardLast4)})
		if p.Status == models.PaymentPending {
			vm.Confirming = true
		}
	}
	vm.Heading = "Thank you for your order"
	switch {
	case vm.Confirming:
		vm.Heading = "We are confirming your payment"
	case o.Status == models.OrderPaymentFailed:
		vm.Heading = "Your payment did not go through"
		if n := len(o.Payments); n > 0 {
			vm.Declined = declineMessage(o.Payments[n-1].DeclineCode)
		}
	case o.Status == models.OrderPendingPayment:
		vm.Heading = "Your order is waiting for payment"
	case o.Status == models.OrderExpired:
		vm.Heading = "This order has expired"
		vm.Layout.Notice = "It was not paid in time, so its items went back on sale. Nothing was charged: place a new order to buy them."
	}
	if c.QueryParam("poll") == "payment" && c.Request().Header.Get("HX-Request") == "true" {
		return s.paymentPoll(c, vm)
	}
	if s.Journal != nil {
		// The journal is for people looking into an order; if it cannot be read, the
		// customer still gets the order page, without that section.
		s.journalSection(c, o, &vm)
		if c.QueryParam("poll") == "journal" && c.Request().Header.Get("HX-Request") == "true" {
			c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
			return render(c, http.StatusOK, pages.JournalEvents(vm.Journal, vm.JournalPage.Poll))
		}
	}
	// The order can take a new payment when it is not paid or expired and no payment is in
	// flight: a second payment while one is unconfirmed would be a second charge waiting to
	// happen.
	if o.Status != models.OrderPaid && o.Status != models.OrderExpired && !vm.Confirming {
		vm.Pay = &pages.PayForm{Action: pathFor(c, routeOrderPay, t.ID, o.ID), CSRF: CSRFToken(c),
			IdempotencyKey: models.NewID("idem"), Total: components.Money(o.Amount, o.Currency)}
		vm.Layout.Scripts = []string{"/static/js/checkout.js"} // the pay form gets the same safe retries
	}
	return render(c, http.StatusOK, pages.Order(vm))
}

// mayView reports whether this browser may see order o: its session placed the order, or the
// request carries the order link signature of the order's receipt (Signer.OrderLink). The
// receipt is sent once the order is paid, so a visitor who came by its link never needs the
// pay form or the payment poll, which work for the session alone.
func mayView(c echo.Context, o *models.Order) (bool, error) {
	if o.SessionID != nil && *o.SessionID == SessionOf(c) {
		return true, nil
	}
	signer, err := signerOf(c)
	if err != nil {
		return false, err
	}
	return signer.validOrderLink(o.ID, c.QueryParam("sig")), nil
}

// journalPageSize is how many journal events the order page shows at a time.
const journalPageSize = 100

// journalLiveFor is how long after an order's last event its "What happened" keeps refreshing
// itself: long enough for a late webhook and the receipt and shipment jobs.
const journalLiveFor = 30 * time.Second

// journalSection fills the order page's "What happened" with one page of the order's journal
// (?journal=N, from 1) and links to the pages before and after it.
// A lost gateway answer that ended in one charge is called out.
func (s *Storefront) journalSection(c echo.Context, o *models.Order, vm *pages.OrderPage) {
	n, err := strconv.Atoi(c.QueryParam("journal"))
	if err != nil || n < 1 {
		n = 1
	}
	page, err := s.Journal.ForOrderPage(c.Request().Context(), o.ID, (n-1)*journalPageSize, journalPageSize)
	if err != nil {
		return
	}
	lost := false
	for _, ev := range page.Events {
		detail := ev.Detail
		if ev.Repeats > 0 && ev.LastAt != nil {
			detail += fmt.Sprintf(" (and %d more like it, the last at %s)", ev.Repeats, ev.LastAt.UTC().Format("15:04:05.000"))
		}
		row := pages.JournalRow{At: ev.At.UTC().Format("15:04:05.000"), Actor: ev.Actor, Event: ev.Kind, Detail: detail}
		if row.ChargeID = journalChargeID.FindString(ev.Detail); row.ChargeID != "" {
			row.ChargeURL = "/gateway#" + row.ChargeID // the charge's row in the gateway's ledger
		}
		lost = lost || ev.Kind == models.JournalGatewayCharge && strings.HasPrefix(ev.Detail, payments.OutcomeUnknown.String())
		vm.Journal = append(vm.Journal, row)
	}
	vm.JournalPage.Showing = fmt.Sprintf("%d events", page.Total)
	if int64(journalPageSize) < page.Total {
		vm.JournalPage.Showing = fmt.Sprintf("events %d–%d of %d", page.Offset+1, page.Offset+len(page.Events), page.Total)
	}
	link := func(n int) string {
		q := url.Values{}
		for k, v := range c.QueryParams() { // a copy: Echo keeps the request's own
			q[k] = v
		}
		q.Set("journal", strconv.Itoa(n))
		q.Del("poll")
		return c.Request().URL.Path + "?" + q.Encode()
	}
	if n > 1 {
		vm.JournalPage.Earlier = link(n - 1)
	}
	if int64(page.Offset+len(page.Events)) < page.Total {
		vm.JournalPage.Later = link(n + 1)
	}
	vm.JournalPage.Open = c.QueryParam("journal") != ""
	// Live while young, on the last page only (earlier pages do not change).
	if young := vm.Confirming || len(page.Events) > 0 && time.Since(page.Events[len(page.Events)-1].At) < journalLiveFor; young && vm.JournalPage.Later == "" {
		q := url.Values{}
		for k, v := range c.QueryParams() {
			q[k] = v
		}
		q.Set("poll", "journal")
		vm.JournalPage.Poll = c.Request().URL.Path + "?" + q.Encode()
	}
	if lost && o.Status == models.OrderPaid && succeededPayments(o) == 1 {
		vm.Recovered = "Response lost — recovered, charged once"
	}
}

// journalChargeID finds the gateway charge a journal event names.
var journalChargeID = regexp.MustCompile(`\bch_[a-z0-9]+`)

// succeededPayments counts o's payments that took the money.
func succeededPayments(o *models.Order) int {
	n := 0
	for _, p := range o.Payments {
		if p.Status == models.PaymentSucceeded {
			n++
		}
	}
	return n
}

// paymentPoll answers the order page's htmx poll (GET /orders/:id?poll=payment): the same
// "still confirming" partial while a payment is pending, and once it is settled an empty
// answer with HX-Refresh, so htmx reloads the page, which then shows the outcome and stops
// polling.
func (s *Storefront) paymentPoll(c echo.Context, vm pages.OrderPage) error {
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	if vm.Confirming {
		return render(c, http.StatusOK, pages.PaymentConfirming(vm.ID))
	}
	c.Response().Header().Set("HX-Refresh", "true")
	return c.NoContent(http.StatusOK)
}

// orders renders the session's order history in this store.
func (s *Storefront) orders(c echo.Context) error {
	t := TenantOf(c)
	os, err := s.Orders.ListForSession(c.Request().Context(), t.ID, SessionOf(c))
	if err != nil {
		return err
	}
	lay, err := s.layoutFor(c, t, "Your orders", -1)
	if err != nil {
		return err
	}
	vm := pages.OrdersPage{Layout: lay, ShopURL: lay.StorePath}
	for _, o := range os {
		status, class := orderStatus(o.Status)
		items := 0
		names := make([]string, 0, len(o.Lines))
		for _, l := range o.Lines {
			items += l.Quantity
			name := l.Name
			if l.Quantity > 1 {
				name += " × " + strconv.Itoa(l.Quantity)
			}
			names = append(names, name)
		}
		vm.Orders = append(vm.Orders, pages.OrderSummary{ID: o.ID, URL: pathFor(c, routeOrder, o.ID), Summary: strings.Join(names, ", "),
			Placed: o.CreatedAt.UTC().Format("2 Jan 2006, 15:04"), Items: items,
			Total: components.Money(o.Amount, o.Currency), Status: status, StatusClass: class})
	}
	return render(c, http.StatusOK, pages.Orders(vm))
}

// orderStatus puts an order status into words, with a class for its colour.
func orderStatus(status string) (words, class string) {
	switch status {
	case models.OrderPaid:
		return "Paid", "paid"
	case models.OrderPaymentFailed:
		return "Payment failed", "failed"
	case models.OrderExpired:
		return "Expired", "failed"
	default:
		return "Pending payment", "pending"
	}
}

// paymentStatus puts a payment's status into words. Pending is never shown as a failure: the
// outcome is unknown, and saying "failed" would invite the customer to pay twice.
func paymentStatus(p models.Payment) string {
	switch p.Status {
	case models.PaymentSucceeded:
		return "Succeeded"
	case models.PaymentFailed:
		if p.DeclineCode != "" {
			return "Failed (" + strings.ReplaceAll(p.DeclineCode, "_", " ") + ")"
		}
		return "Failed"
	case models.PaymentRefunded:
		return "Refunded"
	default:
		return "Processing: outcome not known yet"
	}
}

// shippingPrice writes a zero shipping cost as "Free", as the checkout form does.
func shippingPrice(amount int64, currency string) string {
	if amount == 0 {
		return "Free"
	}
	return components.Money(amount, currency)
}

func shippingLabel(method string) string {
	if method == models.ShippingExpress {
		return "express"
	}
	return "standard"
}

// declineMessage puts a gateway decline code into words for the customer.
func declineMessage(code string) string {
	switch code {
	case "insufficient_funds":
		return "Your card was declined: insufficient funds. You can pay with another card below."
	case "expired_card":
		return "Your card has expired. You can pay with another card below."
	}
	return "Your card was declined. You can pay with another card below."
}
