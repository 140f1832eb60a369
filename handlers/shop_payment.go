package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"checkoutlab/handlers/idempotency"
	"checkoutlab/models"
	"checkoutlab/web/pages"
)

// The storefront's checkout and "pay again" forms run the very same operations as the JSON
// API — POST /api/v1/checkout and POST /api/v1/payments — under the same idempotency
// middleware, with the browser session as the key's principal. The handler reads the form
// once and checks it (field errors are shown before anything is reserved or charged), runs
// the operation under the key, and turns the answer, first or replayed, into what a browser
// wants: a 303 to the order, or the form again with a message. One operation, one stored
// answer, two ways to show it.
//
// The key comes from the Idempotency-Key header (checkout.js sends it with fetch, and gets the
// JSON answer as it is) or, without JavaScript, from the form's hidden idempotency_key field,
// made by the server when it rendered the form: a double submit or the back button sends the
// same key again.

// KeyLookup reads an idempotency key's record; the pending page uses it.
type KeyLookup interface {
	Get(ctx context.Context, tenantID, key string) (*models.IdempotencyRecord, error)
}

// placeOrder is POST /shop/:tenant/checkout, the checkout form.
func (s *Storefront) placeOrder(c echo.Context) error {
	ctx, t, session := c.Request().Context(), TenantOf(c), SessionOf(c)
	form := readCheckoutForm(c)
	cart, err := s.checkoutCart(ctx, t.ID, session, form.CartID)
	if err != nil {
		return err
	}
	if len(cart.Lines) == 0 {
		return c.Redirect(http.StatusSeeOther, withNotice(pathFor(c, routeCart, t.ID), "empty"))
	}
	req, fields := form.request(cart, session)
	if len(fields) > 0 {
		return s.rerenderCheckout(c, cart, form, fields, "Please correct the fields marked below.", http.StatusUnprocessableEntity)
	}
	useFormKey(c, form.IdempotencyKey)
	answer := s.Idempotency.Run(c, func(echo.Context) (any, idempotency.Fingerprint, error) {
		fp, err := s.Cards.checkout(req)
		return req, fp, err
	}, s.checkout)
	if WantsJSON(c) {
		return answer.Send(c)
	}
	return s.presentCheckoutAnswer(c, cart, form, answer)
}

// checkoutCart is the cart the form was shown for (even if an earlier submit already converted
// it: a retry must see the same items), or else the session's open cart.
func (s *Storefront) checkoutCart(ctx context.Context, tenantID, session, cartID string) (*models.Cart, error) {
	if cartID != "" {
		cart, err := s.Carts.ByID(ctx, tenantID, session, cartID)
		if err == nil {
			return cart, nil
		}
		if !errors.Is(err, models.ErrNotFound) {
			return nil, err
		}
	}
	return s.Carts.Current(ctx, tenantID, session)
}

// presentCheckoutAnswer turns the operation's answer into a browser answer.
func (s *Storefront) presentCheckoutAnswer(c echo.Context, cart *models.Cart, form checkoutForm, answer idempotency.Answer) error {
	t := TenantOf(c)
	if err := answer.Err; err != nil {
		e := asDomainError(err)
		switch {
		case errors.Is(err, models.ErrKeyReuse):
			form.IdempotencyKey = models.NewID("idem") // a changed cart is a new operation
			return s.rerenderCheckout(c, cart, form, nil,
				"Your cart or your details changed since this form was first sent. Please check them and place the order again.",
				http.StatusUnprocessableEntity)
		case e.Kind == models.KindInvalid:
			return s.rerenderCheckout(c, cart, form, e.Fields, e.Message, http.StatusUnprocessableEntity)
		case e.Kind == models.KindNotFound:
			return s.rerenderCheckout(c, cart, form, nil, e.Message, http.StatusNotFound)
		case awaitingOutcome(err):
			return c.Redirect(http.StatusSeeOther, pendingURL(c, t.ID, form.IdempotencyKey))
		}
		return err
	}
	status, got := answer.Response.Status, operationAnswerOf(answer.Response.Body)
	switch {
	case status == http.StatusCreated, status == http.StatusPaymentRequired:
		return c.Redirect(http.StatusSeeOther, pathFor(c, routeOrder, got.OrderID))
	case got.Error == models.ErrCartConverted.Code:
		// Another submit of this cart (under another key: a second tab) placed the order.
		o, err := s.Orders.ByCart(c.Request().Context(), t.ID, cart.ID)
		if err != nil {
			return err
		}
		return c.Redirect(http.StatusSeeOther, pathFor(c, routeOrder, o.ID))
	case status == http.StatusConflict:
		return s.rerenderCheckout(c, cart, form, nil, got.Message, http.StatusConflict)
	}
	return fmt.Errorf("checkout answered %d %q, which the storefront cannot show", status, got.Error)
}

// payOrder is POST /shop/:tenant/orders/:id/pay: paying an order again with another card
// after a decline. It is a new operation with a new key (the order page renders one per view
// of its form).
func (s *Storefront) payOrder(c echo.Context) error {
	ctx, t := c.Request().Context(), TenantOf(c)
	o, err := s.Orders.GetAnyTenant(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	if o.TenantID != t.ID {
		return models.Errorf(models.KindNotFound, models.ErrNotFound.Code, "no order %q", c.Param("id"))
	}
	orderPage := pathFor(c, routeOrder, o.ID)
	card, problem := checkCardNumber(c.FormValue("card_number"))
	if problem != "" && !WantsJSON(c) {
		return c.Redirect(http.StatusSeeOther, withNotice(orderPage, "bad_card"))
	}
	req := &paymentRequest{orderID: o.ID, amount: o.Amount, currency: o.Currency, card: card}
	key := c.FormValue("idempotency_key")
	useFormKey(c, key)
	answer := s.Idempotency.Run(c, func(echo.Context) (any, idempotency.Fingerprint, error) {
		if req.card == "" {
			return nil, idempotency.Fingerprint{}, errCardRequired // checkout.js gets the API's 400
		}
		fp, err := s.Cards.payment(req)
		return req, fp, err
	}, s.pay)
	if WantsJSON(c) {
		return answer.Send(c)
	}
	switch err := answer.Err; {
	case err != nil && awaitingOutcome(err):
		return c.Redirect(http.StatusSeeOther, pendingURL(c, t.ID, key))
	case err != nil && asDomainError(err).Kind == models.KindInvalid:
		return c.Redirect(http.StatusSeeOther, withNotice(orderPage, "bad_card"))
	case err != nil:
		return err
	}
	// Paid, declined, already paid, another payment in progress: the order page tells.
	return c.Redirect(http.StatusSeeOther, orderPage)
}

// checkout and pay run the operations behind the forms: exactly the API's.
func (s *Storefront) checkout(c echo.Context) error {
	return runCheckout(c, s.Payments, idempotency.RequestOf(c).(*checkoutRequest))
}

func (s *Storefront) pay(c echo.Context) error {
	return runPayment(c, s.Payments, idempotency.RequestOf(c).(*paymentRequest))
}

// useFormKey makes the form's hidden idempotency_key the request's Idempotency-Key, unless
// the request has the header already (checkout.js sends it).
func useFormKey(c echo.Context, key string) {
	if h := c.Request().Header; h.Get(idempotency.HeaderKey) == "" && key != "" {
		h.Set(idempotency.HeaderKey, key)
	}
}

// awaitingOutcome reports whether err means "the outcome is not known yet": another request
// holds the key, or the gateway did not answer in time and the key was released with its
// progress. The browser then waits on the pending page; it never offers to pay again.
func awaitingOutcome(err error) bool {
	if errors.Is(err, models.ErrRequestInProgress) || errors.Is(err, models.ErrLeaseLost) {
		return true
	}
	switch asDomainError(err).Kind {
	case models.KindUnavailable, models.KindBadGateway, models.KindTimeout, models.KindInternal:
		return true
	}
	return false
}

func pendingURL(c echo.Context, tenantID, key string) string {
	return pathFor(c, routeCheckoutPending, tenantID) + "?key=" + url.QueryEscape(key)
}

// operationAnswer is what the storefront reads of an operation's JSON answer, first or stored.
type operationAnswer struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	OrderID string `json:"order_id"` // declines, payments
	Order   struct {
		ID string `json:"id"`
	} `json:"order"` // checkout
}

func operationAnswerOf(body []byte) operationAnswer {
	var a operationAnswer
	_ = json.Unmarshal(body, &a)
	if a.OrderID == "" {
		a.OrderID = a.Order.ID
	}
	return a
}

// pending shows a checkout whose outcome is not known yet, and refreshes itself until it is:
// then it sends the browser on to the order. It only shows keys of this browser session.
func (s *Storefront) pending(c echo.Context) error {
	t, key := TenantOf(c), c.QueryParam("key")
	rec, err := s.Keys.Get(c.Request().Context(), t.ID, key)
	if errors.Is(err, models.ErrNotFound) {
		// Nothing happened under this key (it was dropped): back to the checkout.
		return c.Redirect(http.StatusSeeOther, pathFor(c, routeCheckout, t.ID))
	}
	if err != nil {
		return err
	}
	if rec.Principal != "session:"+SessionOf(c) {
		return models.Errorf(models.KindNotFound, models.ErrNotFound.Code, "no such checkout")
	}
	if rec.State == models.KeyCompleted && rec.ResponseStatus != nil {
		if got := operationAnswerOf(rec.ResponseBody); got.OrderID != "" {
			return c.Redirect(http.StatusSeeOther, pathFor(c, routeOrder, got.OrderID))
		}
		return c.Redirect(http.StatusSeeOther, withNotice(pathFor(c, routeCart, t.ID), "checkout_failed"))
	}
	lay, err := s.layoutFor(c, t, "Confirming your order", -1)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Refresh", "2")
	return render(c, http.StatusAccepted, pages.Pending(pages.PendingPage{Layout: lay,
		Attempts: strconv.Itoa(rec.Attempts), Since: rec.CreatedAt.UTC().Format("15:04:05 UTC"),
		Charging: strings.HasPrefix(rec.RecoveryPoint, "payment")}))
}
