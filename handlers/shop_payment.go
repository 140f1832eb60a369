package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
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
// middleware. A presenter middleware in front of them turns the form into the API's JSON
// request (with the browser session as the key's principal), and turns the API's answer,
// first or replayed, into what a browser wants: a 303 to the order, or the form again with a
// message. One operation, one stored answer, two ways to show it.
//
// The key comes from the Idempotency-Key header (checkout.js sends it with fetch, and gets the
// JSON answer as it is) or, without JavaScript, from the form's hidden idempotency_key field,
// made by the server when it rendered the form: a double submit or the back button sends the
// same key again.

// KeyLookup reads an idempotency key's record; the pending page uses it.
type KeyLookup interface {
	Get(ctx context.Context, tenantID, key string) (*models.IdempotencyRecord, error)
}

// presentCheckout is the presenter of POST /shop/:tenant/checkout. See above.
func (s *Storefront) presentCheckout(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, t, session := c.Request().Context(), TenantOf(c), SessionOf(c)
		form := readCheckoutForm(c)
		cart, err := s.checkoutCart(ctx, t.ID, session, form.CartID)
		if err != nil {
			return err
		}
		if len(cart.Lines) == 0 {
			return c.Redirect(http.StatusSeeOther, withNotice(pathFor(c, routeCart, t.ID), "empty"))
		}
		in := models.NewOrder{TenantID: t.ID, Email: form.Email,
			Shipping: models.Address{Name: form.Name, Address: form.Address, City: form.City,
				PostalCode: form.PostalCode, Country: form.Country},
			ShippingMethod: form.ShippingMethod}
		items := make([]map[string]any, 0, len(cart.Lines))
		for _, l := range cart.Lines {
			in.Items = append(in.Items, models.Item{SKU: l.Product.SKU, Quantity: l.Quantity})
			items = append(items, map[string]any{"sku": l.Product.SKU, "quantity": l.Quantity})
		}
		// Field errors are shown inline before anything is reserved or charged.
		if fields := checkoutFieldErrors(in, form.CardNumber); len(fields) > 0 {
			return s.rerenderCheckout(c, cart, form, fields, "Please correct the fields marked below.", http.StatusUnprocessableEntity)
		}
		card, _ := checkCardNumber(form.CardNumber)
		body, err := json.Marshal(map[string]any{"items": items, "email": form.Email,
			"shipping_address": map[string]string{"name": form.Name, "address": form.Address, "city": form.City,
				"postal_code": form.PostalCode, "country": form.Country},
			"shipping_method": form.ShippingMethod, "card_number": card})
		if err != nil {
			return err
		}
		c.Set(ctxCheckoutCart, cart.ID)
		rec, err := runAsJSON(c, next, body, form.IdempotencyKey)
		if WantsJSON(c) {
			return rec.passThrough(c, err)
		}
		return s.presentCheckoutAnswer(c, cart, form, rec, err)
	}
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

// checkoutFieldErrors validates the form as the order store and the card check will, keyed by
// form field.
func checkoutFieldErrors(in models.NewOrder, cardNumber string) map[string]string {
	in.Normalize()
	fields := map[string]string{}
	if err := in.Validate(); err != nil {
		for k, v := range models.ErrorOf(err).Fields {
			fields[k] = v
		}
	}
	if _, known := countryNames[in.Shipping.Country]; !known && fields["country"] == "" {
		fields["country"] = "Choose a country from the list."
	}
	if _, problem := checkCardNumber(cardNumber); problem != "" {
		fields["card_number"] = problem
	}
	return fields
}

// presentCheckoutAnswer turns the operation's answer into a browser answer.
func (s *Storefront) presentCheckoutAnswer(c echo.Context, cart *models.Cart, form checkoutForm, rec *answerRecorder, err error) error {
	t := TenantOf(c)
	if err != nil {
		e := asDomainError(err)
		switch {
		case errors.Is(err, idempotency.ErrKeyReuse):
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
	answer := rec.decode()
	switch {
	case rec.status == http.StatusCreated, rec.status == http.StatusPaymentRequired:
		return c.Redirect(http.StatusSeeOther, orderURLFor(c, answer))
	case answer.Error == models.ErrCartConverted.Code:
		// Another submit of this cart (under another key: a second tab) placed the order.
		o, err := s.Orders.ByCart(c.Request().Context(), t.ID, cart.ID)
		if err != nil {
			return err
		}
		return c.Redirect(http.StatusSeeOther, pathFor(c, routeOrder, o.ID))
	case rec.status == http.StatusConflict:
		return s.rerenderCheckout(c, cart, form, nil, answer.Message, http.StatusConflict)
	}
	return &models.Error{Kind: models.KindInternal, Code: "unexpected_answer", Message: answer.Message}
}

// presentPayment is the presenter of POST /shop/:tenant/orders/:id/pay: paying an order again
// with another card after a decline. It is a new operation with a new key (the order page
// renders one per view of its form).
func (s *Storefront) presentPayment(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
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
		body, err := json.Marshal(map[string]any{"order_id": o.ID, "amount": o.Amount, "currency": o.Currency, "card_number": card})
		if err != nil {
			return err
		}
		key := c.FormValue("idempotency_key")
		rec, err := runAsJSON(c, next, body, key)
		if WantsJSON(c) {
			return rec.passThrough(c, err)
		}
		switch {
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
}

// checkoutOperation and payOperation are the handlers behind the presenters: exactly the API's.
func (s *Storefront) checkoutOperation(c echo.Context) error {
	return runCheckout(c, s.Payments, idempotency.RequestOf(c).(*checkoutRequest))
}
func (s *Storefront) payOperation(c echo.Context) error {
	return runPayment(c, s.Payments, idempotency.RequestOf(c).(*paymentRequest))
}

// awaitingOutcome reports whether err means "the outcome is not known yet": another request
// holds the key, or the gateway did not answer in time and the key was released with its
// progress. The browser then waits on the pending page; it never offers to pay again.
func awaitingOutcome(err error) bool {
	if errors.Is(err, idempotency.ErrRequestInProgress) || errors.Is(err, models.ErrLeaseLost) {
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

// runAsJSON runs the inner chain (idempotency middleware and operation) on a JSON request
// body, with key as the Idempotency-Key unless the request has the header already, and
// captures its answer instead of sending it.
func runAsJSON(c echo.Context, next echo.HandlerFunc, body []byte, key string) (*answerRecorder, error) {
	req := c.Request()
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	if req.Header.Get(idempotency.HeaderKey) == "" && key != "" {
		req.Header.Set(idempotency.HeaderKey, key)
	}
	resp := c.Response()
	orig := resp.Writer
	rec := &answerRecorder{header: http.Header{}}
	resp.Writer = rec
	defer func() { resp.Writer, resp.Committed, resp.Status, resp.Size = orig, false, http.StatusOK, 0 }()
	err := next(c)
	return rec, err
}

// answerRecorder holds an answer written by the inner handlers.
type answerRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *answerRecorder) Header() http.Header { return r.header }
func (r *answerRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}
func (r *answerRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// passThrough sends the captured answer (or err) as it is, for checkout.js.
func (r *answerRecorder) passThrough(c echo.Context, err error) error {
	for _, name := range []string{"Retry-After", idempotency.HeaderReplayed, echo.HeaderLocation} {
		if v := r.header.Get(name); v != "" {
			c.Response().Header().Set(name, v)
		}
	}
	if err != nil {
		return err
	}
	return c.Blob(r.status, r.header.Get(echo.HeaderContentType), r.body.Bytes())
}

// operationAnswer is what the presenters read of an operation's JSON answer.
type operationAnswer struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	OrderID string `json:"order_id"` // declines, payments
	Order   struct {
		ID string `json:"id"`
	} `json:"order"` // checkout
}

func (r *answerRecorder) decode() operationAnswer {
	var a operationAnswer
	_ = json.Unmarshal(r.body.Bytes(), &a)
	if a.OrderID == "" {
		a.OrderID = a.Order.ID
	}
	return a
}

func orderURLFor(c echo.Context, a operationAnswer) string { return pathFor(c, routeOrder, a.OrderID) }

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
		ans := (&answerRecorder{status: *rec.ResponseStatus, body: *bytes.NewBuffer(rec.ResponseBody)}).decode()
		if ans.OrderID != "" {
			return c.Redirect(http.StatusSeeOther, orderURLFor(c, ans))
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
