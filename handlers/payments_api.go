package handlers

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
	"checkoutlab/payments"
)

// PaymentOperations is what the payment endpoints need: the two operations of package payments.
type PaymentOperations interface {
	Checkout(ctx context.Context, key payments.Key, endpoint string, req payments.CheckoutRequest) (payments.Response, error)
	Pay(ctx context.Context, key payments.Key, endpoint string, req payments.PaymentRequest) (payments.Response, error)
}

// PaymentsAPI serves POST /api/v1/checkout and POST /api/v1/payments. Both run under an
// idempotency key; the operations complete the key themselves, in the transaction that
// records the outcome.
type PaymentsAPI struct {
	Ops PaymentOperations
	// CheckoutIdempotent and PaymentIdempotent are the idempotency middleware of each route,
	// built with CheckoutFingerprint and PaymentFingerprint.
	CheckoutIdempotent echo.MiddlewareFunc
	PaymentIdempotent  echo.MiddlewareFunc
}

// Routes mounts the payment endpoints on an authenticated /api/v1 group.
func (h *PaymentsAPI) Routes(g *echo.Group) {
	if h.CheckoutIdempotent == nil || h.PaymentIdempotent == nil {
		panic("handlers: PaymentsAPI needs its idempotency middleware")
	}
	g.POST("/checkout", h.checkout, h.CheckoutIdempotent).Name = "api.checkout"
	g.POST("/payments", h.pay, h.PaymentIdempotent).Name = "api.payments"
}

// checkout places an order and pays for it in one operation.
//
// Answers: 201 {"order","payment"}; 402 card_declined (with decline_code, order_id and
// payment_id, so the client can pay the order with another card); 400 invalid_json /
// invalid_request; 404 unknown_product; 409 out_of_stock; 503 gateway_unavailable (nothing
// charged); 502/504 payment_outcome_unknown (retry with the same key: it resumes, never
// charges twice).
func (h *PaymentsAPI) checkout(c echo.Context) error { return runCheckout(c, h.Ops) }

// runCheckout decodes a checkout request and runs the checkout operation under the request's
// idempotency key. The API and the storefront both end here; the storefront has put the
// browser's cart in the context, so the order converts it.
func runCheckout(c echo.Context, ops PaymentOperations) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	order, err := decodeOrderRequest(body)
	if err != nil {
		return err
	}
	card, err := cardNumberOf(body)
	if err != nil {
		return err
	}
	in := order.newOrder()
	in.TenantID = TenantOf(c).ID
	if cartID, ok := c.Get(ctxCheckoutCart).(string); ok {
		in.CartID, in.SessionID = cartID, SessionOf(c)
	}
	endpoint := c.Request().Method + " " + c.Path()
	resp, err := ops.Checkout(c.Request().Context(), IdempotencyKeyOf(c), endpoint, payments.CheckoutRequest{Order: in, CardNumber: card})
	if err != nil {
		return err
	}
	return Response(resp).Write(c)
}

// pay pays an existing order. Answers as checkout, plus 404 for an unknown order, 400
// amount_mismatch, 409 order_already_paid and 409 payment_in_progress.
func (h *PaymentsAPI) pay(c echo.Context) error { return runPayment(c, h.Ops) }

// runPayment decodes a payment request and runs the payment operation under the request's
// idempotency key, for the API and the storefront alike.
func runPayment(c echo.Context, ops PaymentOperations) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	p, err := decodePaymentRequest(body)
	if err != nil {
		return err
	}
	p.TenantID = TenantOf(c).ID
	endpoint := c.Request().Method + " " + c.Path()
	resp, err := ops.Pay(c.Request().Context(), IdempotencyKeyOf(c), endpoint, p)
	if err != nil {
		return err
	}
	return Response(resp).Write(c)
}

func cardNumberOf(body []byte) (string, error) {
	obj, err := jsonObject(body, "The request")
	if err != nil {
		return "", err
	}
	var card string
	if err := member(obj, "card_number", "card_number", &card); err != nil {
		return "", err
	}
	card = strings.ReplaceAll(strings.TrimSpace(card), " ", "")
	if card == "" {
		return "", models.Invalid("A card number is required.", map[string]string{"card_number": "Enter a card number."})
	}
	return card, nil
}

func decodePaymentRequest(body []byte) (payments.PaymentRequest, error) {
	obj, err := jsonObject(body, "The payment")
	if err != nil {
		return payments.PaymentRequest{}, err
	}
	var p payments.PaymentRequest
	var amount float64
	for _, m := range []struct {
		name string
		dst  any
	}{{"order_id", &p.OrderID}, {"amount", &amount}, {"currency", &p.Currency}} {
		if err := member(obj, m.name, m.name, m.dst); err != nil {
			return p, err
		}
	}
	fields := map[string]string{}
	if p.OrderID = strings.TrimSpace(p.OrderID); p.OrderID == "" {
		fields["order_id"] = "The order id is required."
	}
	if amount != float64(int64(amount)) || amount <= 0 {
		fields["amount"] = "The amount must be a positive whole number of minor units."
	}
	if p.Currency = strings.ToUpper(strings.TrimSpace(p.Currency)); len(p.Currency) != 3 {
		fields["currency"] = "The currency must be an ISO 4217 code such as USD."
	}
	if len(fields) > 0 {
		return p, models.Invalid("The payment is not valid.", fields)
	}
	p.Amount = int64(amount)
	if p.CardNumber, err = cardNumberOf(body); err != nil {
		return p, err
	}
	return p, nil
}

// CardFingerprint turns a card number into what idempotency may store about it: an HMAC under
// a key that lives outside the database (derived from the webhook secret). Two requests with
// the same card fingerprint alike; the stored value cannot be turned back into the card, even
// by someone holding the database.
type CardFingerprint []byte

// NewCardFingerprint derives the HMAC key from secret.
func NewCardFingerprint(secret string) CardFingerprint {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("checkoutlab card fingerprint v1"))
	return m.Sum(nil)
}

func (k CardFingerprint) of(card string) string {
	m := hmac.New(sha256.New, k)
	m.Write([]byte(strings.ReplaceAll(strings.TrimSpace(card), " ", "")))
	return hex.EncodeToString(m.Sum(nil))
}

type canonicalCheckout struct {
	Order canonicalOrder `json:"order"`
	Card  string         `json:"card_hmac"`
}

// CheckoutFingerprint is the FingerprintFunc of POST /api/v1/checkout: the order's significant
// fields (as for POST /api/v1/orders) and the card, fingerprinted with k.
func (k CardFingerprint) CheckoutFingerprint(body []byte) (Fingerprint, error) {
	order, err := decodeOrderRequest(body)
	if err != nil {
		return Fingerprint{}, err
	}
	card, err := cardNumberOf(body)
	if err != nil {
		return Fingerprint{}, err
	}
	return fingerprintOf(canonicalCheckout{Order: order.canonical(), Card: k.of(card)})
}

type canonicalPayment struct {
	OrderID  string `json:"order_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Card     string `json:"card_hmac"`
}

// PaymentFingerprint is the FingerprintFunc of POST /api/v1/payments: order, amount, currency
// and the card, fingerprinted with k.
func (k CardFingerprint) PaymentFingerprint(body []byte) (Fingerprint, error) {
	p, err := decodePaymentRequest(body)
	if err != nil {
		return Fingerprint{}, err
	}
	return fingerprintOf(canonicalPayment{OrderID: p.OrderID, Amount: p.Amount, Currency: p.Currency, Card: k.of(p.CardNumber)})
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
func RenderOperation(out payments.Result) (payments.Response, error) {
	var resp Response
	var err error
	switch {
	case out.Err != nil:
		status, body := ErrorBody(out.Err)
		body["order_id"] = out.Order.ID
		body["payment_id"] = out.Payment.ID
		resp, err = JSONResponse(status, body)
	case payments.IsCheckout(out.Endpoint):
		resp, err = JSONResponse(http.StatusCreated, map[string]any{"order": OrderJSONOf(out.Order), "payment": PaymentJSONOf(out.Payment)})
	default:
		resp, err = JSONResponse(http.StatusCreated, PaymentJSONOf(out.Payment))
	}
	if err != nil {
		return payments.Response{}, err
	}
	if resp.Status == http.StatusCreated {
		resp.Header.Set(echo.HeaderLocation, OrderURL(out.Order.ID))
	}
	return payments.Response(resp), nil
}
