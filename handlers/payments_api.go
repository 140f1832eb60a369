package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"checkoutlab/handlers/idempotency"
	"checkoutlab/models"
	"checkoutlab/payments"
)

// PaymentOperations is what the payment endpoints need: the two operations of package payments.
type PaymentOperations interface {
	Checkout(ctx context.Context, key payments.Key, req payments.CheckoutRequest) (models.Response, error)
	Pay(ctx context.Context, key payments.Key, req payments.PaymentRequest) (models.Response, error)
}

// PaymentEndpoints maps every route that runs a payment operation to that operation, under the
// name the idempotency middleware records its keys with (method and route). The API and the
// storefront's forms run the same two operations; the completer finishes the abandoned keys of
// exactly these endpoints, and renders their answers for the operation.
var PaymentEndpoints = map[string]payments.Operation{
	"POST /api/v1/checkout":             payments.OperationCheckout,
	"POST /api/v1/payments":             payments.OperationPayment,
	"POST /shop/:tenant/checkout":       payments.OperationCheckout,
	"POST /shop/:tenant/orders/:id/pay": payments.OperationPayment,
}

// PaymentsAPI serves POST /api/v1/checkout and POST /api/v1/payments. Both run under an
// idempotency key; the operations complete the key themselves, in the transaction that
// records the outcome.
type PaymentsAPI struct {
	Ops         PaymentOperations
	Idempotency *idempotency.Middleware
	// Cards fingerprints the card of a request, for the idempotency middleware.
	Cards CardFingerprint
}

// Routes mounts the payment endpoints on an authenticated /api/v1 group.
func (h *PaymentsAPI) Routes(g *echo.Group) {
	if h.Idempotency == nil || h.Cards == nil {
		panic("handlers: PaymentsAPI needs its idempotency middleware and card fingerprint")
	}
	g.POST("/checkout", h.checkout, h.Idempotency.Route(h.Cards.decodeCheckout())).Name = "api.checkout"
	g.POST("/payments", h.pay, h.Idempotency.Route(h.Cards.decodePayment())).Name = "api.payments"
}

// checkout places an order and pays for it in one operation. The order is validated here, once
// its key is reserved, so that a 400 forgets the key and a corrected request may use it.
//
// Answers: 201 {"order","payment"}; 402 card_declined (with decline_code, order_id and
// payment_id, so the client can pay the order with another card); 400 invalid_json /
// invalid_request; 404 unknown_product; 409 out_of_stock; 503 gateway_unavailable (nothing
// charged); 502/504 payment_outcome_unknown (retry with the same key: it resumes, never
// charges twice).
func (h *PaymentsAPI) checkout(c echo.Context) error {
	req := idempotency.RequestOf(c).(*checkoutRequest)
	order := req.order.newOrder()
	if err := order.Validate(); err != nil {
		return err
	}
	return runCheckout(c, h.Ops, req)
}

// runCheckout runs the checkout operation on a request whose order is valid, under the
// request's idempotency key, for the API and the storefront alike.
func runCheckout(c echo.Context, ops PaymentOperations, req *checkoutRequest) error {
	resp, err := ops.Checkout(c.Request().Context(), idempotency.KeyOf(c), req.operation(TenantOf(c).ID))
	if err != nil {
		return err
	}
	return writeResponse(c, resp)
}

// pay pays an existing order. Answers as checkout, plus 404 for an unknown order, 400
// amount_mismatch, 409 order_already_paid and 409 payment_in_progress.
func (h *PaymentsAPI) pay(c echo.Context) error {
	return runPayment(c, h.Ops, idempotency.RequestOf(c).(*paymentRequest))
}

// runPayment runs the payment operation under the request's idempotency key, for the API and
// the storefront alike.
func runPayment(c echo.Context, ops PaymentOperations, req *paymentRequest) error {
	resp, err := ops.Pay(c.Request().Context(), idempotency.KeyOf(c), req.operation(TenantOf(c).ID))
	if err != nil {
		return err
	}
	return writeResponse(c, resp)
}

// PaymentJSON is a payment as the API shows it. The card appears only as brand and last four
// digits: the shop never has more at rest.
type PaymentJSON struct {
	ID              string  `json:"id"`
	OrderID         string  `json:"order_id"`
	Status          string  `json:"status"`
	Amount          int64   `json:"amount"`
	Currency        string  `json:"currency"`
	GatewayChargeID *string `json:"gateway_charge_id"`
	CardBrand       string  `json:"card_brand"`
	CardLast4       string  `json:"card_last4"`
	DeclineCode     string  `json:"decline_code,omitempty"`
	Created         string  `json:"created"`
}

// PaymentJSONOf builds the API view of p.
func PaymentJSONOf(p *models.Payment) *PaymentJSON {
	if p == nil {
		return nil
	}
	return &PaymentJSON{ID: p.ID, OrderID: p.OrderID, Status: p.Status, Amount: p.Amount, Currency: p.Currency,
		GatewayChargeID: p.GatewayChargeID, CardBrand: p.CardBrand, CardLast4: p.CardLast4, DeclineCode: p.DeclineCode,
		Created: p.CreatedAt.UTC().Truncate(time.Second).Format(time.RFC3339)}
}

// RenderOperation is the payments.Renderer of both endpoints: the one place that decides the
// bytes of a checkout or payment answer, for the request path and the completer alike.
func RenderOperation(out payments.Result) (models.Response, error) {
	var resp models.Response
	var err error
	switch {
	case out.Err != nil:
		status, body := ErrorBody(out.Err)
		body["order_id"] = out.Order.ID
		body["payment_id"] = out.Payment.ID
		resp, err = jsonResponse(status, body)
	case out.Operation == payments.OperationCheckout:
		resp, err = jsonResponse(http.StatusCreated, map[string]any{"order": OrderJSONOf(out.Order), "payment": PaymentJSONOf(out.Payment)})
	default:
		resp, err = jsonResponse(http.StatusCreated, PaymentJSONOf(out.Payment))
	}
	if err != nil {
		return models.Response{}, err
	}
	if resp.Status == http.StatusCreated {
		resp.Header.Set(echo.HeaderLocation, OrderURL(out.Order.ID))
	}
	return resp, nil
}
