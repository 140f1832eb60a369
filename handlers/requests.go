package handlers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"checkoutlab/handlers/idempotency"
	"checkoutlab/models"
	"checkoutlab/payments"
)

// The requests of the idempotent endpoints, decoded once by the idempotency middleware
// (idempotency.Decoder) before anything is reserved, and what counts as "the same request"
// for each: the canonical form its Fingerprint hashes. Members are read by their exact names;
// everything else ("metadata", "note", unknown members) is ignored.

// jsonRequest is the idempotency.Decoder of a JSON endpoint: it reads the body once, as one
// JSON object (what names the request in the error for anything else: "The order"), and hands
// it to decode.
func jsonRequest(what string, decode func(obj map[string]json.RawMessage) (any, idempotency.Fingerprint, error)) idempotency.Decoder {
	return func(c echo.Context) (any, idempotency.Fingerprint, error) {
		body, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return nil, idempotency.Fingerprint{}, err // the body limit's 413, or a client that went away
		}
		obj, err := jsonObject(body, what)
		if err != nil {
			return nil, idempotency.Fingerprint{}, err
		}
		return decode(obj)
	}
}

// jsonObject reads body as one JSON object, keeping each member's raw value. Members are found
// by their exact name: encoding/json would match struct fields case-insensitively ("EMAIL" for
// "email"), which would let two spellings of one body mean different things depending on
// member order. A duplicated member keeps its last value, as everywhere in encoding/json.
func jsonObject(body []byte, what string) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		var syntaxErr *json.SyntaxError
		if errors.As(err, &syntaxErr) || !json.Valid(body) {
			return nil, models.ErrInvalidJSON
		}
		return nil, models.Invalid(what+" must be a JSON object.", nil)
	}
	return obj, nil
}

// member decodes obj[name] into dst; a missing member or null leaves dst at its zero value.
// A value of the wrong type is an invalid_request naming field.
func member(obj map[string]json.RawMessage, name, field string, dst any) error {
	raw, ok := obj[name]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return models.Invalid("The request is not valid.", map[string]string{field: "has the wrong type"})
	}
	return nil
}

// orderRequest is the significant content of POST /api/v1/orders, and of the order part of a
// checkout. Quantities are float64 so that every spelling of a number reads the same and
// a fractional quantity stays distinguishable (and is rejected by validation).
type orderRequest struct {
	Items          []orderItem
	Email          string
	Shipping       models.Address
	ShippingMethod string
}

type orderItem struct {
	SKU      string
	Quantity float64
}

// decodeOrderRequest reads the significant fields of an order by their exact names:
// items[].sku, items[].quantity, email, shipping_address.{name,address,city,postal_code,
// country} and shipping_method. Everything else ("metadata", "note", unknown members) is
// ignored.
func decodeOrderRequest(obj map[string]json.RawMessage) (*orderRequest, error) {
	var r orderRequest
	var items []map[string]json.RawMessage
	var addr map[string]json.RawMessage
	if err := member(obj, "items", "items", &items); err != nil {
		return nil, err
	}
	for i, it := range items {
		field := fmt.Sprintf("items[%d]", i)
		var line orderItem
		if err := member(it, "sku", field, &line.SKU); err != nil {
			return nil, err
		}
		if err := member(it, "quantity", field, &line.Quantity); err != nil {
			return nil, err
		}
		r.Items = append(r.Items, line)
	}
	if err := member(obj, "email", "email", &r.Email); err != nil {
		return nil, err
	}
	if err := member(obj, "shipping_address", "shipping_address", &addr); err != nil {
		return nil, err
	}
	for name, dst := range map[string]*string{"name": &r.Shipping.Name, "address": &r.Shipping.Address,
		"city": &r.Shipping.City, "postal_code": &r.Shipping.PostalCode, "country": &r.Shipping.Country} {
		if err := member(addr, name, name, dst); err != nil {
			return nil, err
		}
	}
	if err := member(obj, "shipping_method", "shipping_method", &r.ShippingMethod); err != nil {
		return nil, err
	}
	return &r, nil
}

// newOrder turns the request into the models' NewOrder, normalised (trimmed, country upper
// case, default shipping method) exactly as the order store will see it. A quantity that is
// not a whole number becomes 0, which validation rejects.
func (r *orderRequest) newOrder() models.NewOrder {
	n := models.NewOrder{Email: r.Email, Shipping: r.Shipping, ShippingMethod: r.ShippingMethod}
	for _, it := range r.Items {
		q := 0
		if it.Quantity == float64(int(it.Quantity)) && it.Quantity > -1e6 && it.Quantity < 1e6 {
			q = int(it.Quantity)
		}
		n.Items = append(n.Items, models.Item{SKU: it.SKU, Quantity: q})
	}
	n.Normalize()
	return n
}

// canonicalOrder is the canonical form hashed for an order. Its field order is the key order.
//
// Items are sorted by SKU: an order is a set of lines (the store rejects a SKU that appears
// twice), so [mug, lamp] and [lamp, mug] are the same order. Line numbers in the stored order
// follow the first request's order; a replay returns that first answer anyway.
type canonicalOrder struct {
	Items []canonicalItem `json:"items"`
	Email string          `json:"email"`
	// Shipping holds the normalised address (trimmed, country upper case).
	Shipping       models.Address `json:"shipping_address"`
	ShippingMethod string         `json:"shipping_method"`
}

type canonicalItem struct {
	SKU      string  `json:"sku"`
	Quantity float64 `json:"quantity"`
}

func (r *orderRequest) canonical() canonicalOrder {
	n := r.newOrder()
	c := canonicalOrder{Email: n.Email, Shipping: n.Shipping, ShippingMethod: n.ShippingMethod,
		Items: make([]canonicalItem, len(r.Items))}
	for i, it := range r.Items {
		c.Items[i] = canonicalItem{SKU: n.Items[i].SKU, Quantity: it.Quantity}
	}
	sort.Slice(c.Items, func(i, j int) bool {
		if c.Items[i].SKU != c.Items[j].SKU {
			return c.Items[i].SKU < c.Items[j].SKU
		}
		return c.Items[i].Quantity < c.Items[j].Quantity
	})
	return c
}

// OrderFingerprint is what counts as the same POST /api/v1/orders. Significant: each item's
// SKU and quantity (in any order), email, the shipping address and the shipping method (absent
// means "standard"). Not significant: member order, white space, number spelling, and free
// members such as "metadata" or "note". It returns a 400 error for a body it cannot read.
func OrderFingerprint(body []byte) (idempotency.Fingerprint, error) {
	obj, err := jsonObject(body, "The order")
	if err != nil {
		return idempotency.Fingerprint{}, err
	}
	_, fp, err := orderOf(obj)
	return fp, err
}

// decodeOrder is the idempotency.Decoder of POST /api/v1/orders: an *orderRequest.
var decodeOrder = jsonRequest("The order", orderOf)

func orderOf(obj map[string]json.RawMessage) (any, idempotency.Fingerprint, error) {
	r, err := decodeOrderRequest(obj)
	if err != nil {
		return nil, idempotency.Fingerprint{}, err
	}
	fp, err := idempotency.FingerprintOf(r.canonical())
	return r, fp, err
}

// checkoutRequest is a checkout, as POST /api/v1/checkout and the storefront's checkout form
// send it: the order and the card to pay it with (its digits, spaces removed). A storefront
// checkout also names the browser's cart, which the order converts (once: a second checkout
// of it is refused with cart_already_converted). The fingerprint is the order's and the card's.
type checkoutRequest struct {
	order     *orderRequest
	card      string
	cartID    string
	sessionID string
}

// operation is the checkout operation's request, for tenantID.
func (r *checkoutRequest) operation(tenantID string) payments.CheckoutRequest {
	in := r.order.newOrder()
	in.TenantID, in.CartID, in.SessionID = tenantID, r.cartID, r.sessionID
	return payments.CheckoutRequest{Order: in, CardNumber: r.card}
}

// paymentRequest is a payment of an order, as POST /api/v1/payments and the storefront's "pay
// with another card" form send it.
type paymentRequest struct {
	orderID  string
	amount   int64
	currency string
	card     string
}

// cardNumberOf reads the card_number member: its digits, spaces removed.
func cardNumberOf(obj map[string]json.RawMessage) (string, error) {
	var card string
	if err := member(obj, "card_number", "card_number", &card); err != nil {
		return "", err
	}
	card = strings.ReplaceAll(strings.TrimSpace(card), " ", "")
	if card == "" {
		return "", errCardRequired
	}
	return card, nil
}

func decodePaymentRequest(obj map[string]json.RawMessage) (*paymentRequest, error) {
	var p paymentRequest
	var amount float64
	for _, m := range []struct {
		name string
		dst  any
	}{{"order_id", &p.orderID}, {"amount", &amount}, {"currency", &p.currency}} {
		if err := member(obj, m.name, m.name, m.dst); err != nil {
			return nil, err
		}
	}
	fields := map[string]string{}
	if p.orderID = strings.TrimSpace(p.orderID); p.orderID == "" {
		fields["order_id"] = "The order id is required."
	}
	if amount != float64(int64(amount)) || amount <= 0 {
		fields["amount"] = "The amount must be a positive whole number of minor units."
	}
	if p.currency = strings.ToUpper(strings.TrimSpace(p.currency)); len(p.currency) != 3 {
		fields["currency"] = "The currency must be an ISO 4217 code such as USD."
	}
	if len(fields) > 0 {
		return nil, models.Invalid("The payment is not valid.", fields)
	}
	p.amount = int64(amount)
	var err error
	if p.card, err = cardNumberOf(obj); err != nil {
		return nil, err
	}
	return &p, nil
}

// errCardRequired is the answer to a request without a card number.
var errCardRequired = models.Invalid("A card number is required.", map[string]string{"card_number": "Enter a card number."})

// operation is the payment operation's request, for tenantID.
func (p *paymentRequest) operation(tenantID string) payments.PaymentRequest {
	return payments.PaymentRequest{TenantID: tenantID, OrderID: p.orderID, Amount: p.amount,
		Currency: p.currency, CardNumber: p.card}
}

// CardFingerprint turns a card number into what idempotency may store about it: an HMAC under
// the shop's own secret (SHOP_SECRET, or the random one made at first start in DATA_DIR), which
// is never in the database and never shared with the gateway. Two requests with the same card
// fingerprint alike; the stored value cannot be turned back into the card by someone holding
// the database, the webhook secret and the last four digits: a card number has few enough
// unknown digits to try them all, so the key must be one nobody else has.
type CardFingerprint []byte

// NewCardFingerprint derives the HMAC key from the shop's secret, for this one purpose.
func NewCardFingerprint(shopSecret []byte) CardFingerprint {
	m := hmac.New(sha256.New, shopSecret)
	m.Write([]byte("checkoutlab card fingerprint v2"))
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

// checkout is what counts as the same checkout: the order's significant fields (as for POST
// /api/v1/orders) and the card, fingerprinted with k.
func (k CardFingerprint) checkout(r *checkoutRequest) (idempotency.Fingerprint, error) {
	return idempotency.FingerprintOf(canonicalCheckout{Order: r.order.canonical(), Card: k.of(r.card)})
}

// decodeCheckout is the idempotency.Decoder of POST /api/v1/checkout: a *checkoutRequest.
func (k CardFingerprint) decodeCheckout() idempotency.Decoder {
	return jsonRequest("The order", func(obj map[string]json.RawMessage) (any, idempotency.Fingerprint, error) {
		order, err := decodeOrderRequest(obj)
		if err != nil {
			return nil, idempotency.Fingerprint{}, err
		}
		card, err := cardNumberOf(obj)
		if err != nil {
			return nil, idempotency.Fingerprint{}, err
		}
		r := &checkoutRequest{order: order, card: card}
		fp, err := k.checkout(r)
		return r, fp, err
	})
}

type canonicalPayment struct {
	OrderID  string `json:"order_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Card     string `json:"card_hmac"`
}

// payment is what counts as the same payment: order, amount, currency and the card,
// fingerprinted with k.
func (k CardFingerprint) payment(p *paymentRequest) (idempotency.Fingerprint, error) {
	return idempotency.FingerprintOf(canonicalPayment{OrderID: p.orderID, Amount: p.amount, Currency: p.currency, Card: k.of(p.card)})
}

// decodePayment is the idempotency.Decoder of POST /api/v1/payments: a *paymentRequest.
func (k CardFingerprint) decodePayment() idempotency.Decoder {
	return jsonRequest("The payment", func(obj map[string]json.RawMessage) (any, idempotency.Fingerprint, error) {
		p, err := decodePaymentRequest(obj)
		if err != nil {
			return nil, idempotency.Fingerprint{}, err
		}
		fp, err := k.payment(p)
		return p, fp, err
	})
}
