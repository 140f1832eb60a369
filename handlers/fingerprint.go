package handlers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"checkoutlab/models"
)

// Fingerprint identifies what a request asks for, independently of how it is spelled.
//
// Params is the canonical JSON of the endpoint's significant fields: fixed key order, no white
// space, numbers as Go prints a float64 (1, 1.0 and 1e0 all become 1), free fields such as
// "metadata" or "note" left out. Hash is the SHA-256 of Params, in hex. Two requests under one
// idempotency key are "the same operation" exactly when their hashes are equal. Params is
// stored with the key so a background completer can finish the operation without the client;
// it must therefore never contain a card number.
type Fingerprint struct {
	Hash   string
	Params []byte
}

// FingerprintFunc derives the Fingerprint of an endpoint's request body. It returns a 400
// error (invalid_json, invalid_request) for a body it cannot read; the idempotency middleware
// then answers without reserving anything.
type FingerprintFunc func(body []byte) (Fingerprint, error)

// fingerprintOf hashes the canonical form v. v must be a struct (fixed field order) or contain
// only structs, slices, strings and numbers, so json.Marshal is deterministic.
func fingerprintOf(v any) (Fingerprint, error) {
	params, err := json.Marshal(v)
	if err != nil {
		return Fingerprint{}, fmt.Errorf("encode canonical request: %w", err)
	}
	sum := sha256.Sum256(params)
	return Fingerprint{Hash: hex.EncodeToString(sum[:]), Params: params}, nil
}

// ErrInvalidJSON is the answer to a body that is not JSON.
var ErrInvalidJSON = &models.Error{Kind: models.KindInvalid, Code: "invalid_json", Message: "the request body is not valid JSON"}

// jsonObject reads body as one JSON object, keeping each member's raw value. Members are found
// by their exact name: encoding/json would match struct fields case-insensitively ("EMAIL" for
// "email"), which would let two spellings of one body mean different things depending on
// member order. A duplicated member keeps its last value, as everywhere in encoding/json.
func jsonObject(body []byte, what string) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		var syntaxErr *json.SyntaxError
		if errors.As(err, &syntaxErr) || !json.Valid(body) {
			return nil, ErrInvalidJSON
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

// orderRequest is the significant content of POST /api/v1/orders (and, later, of the order part
// of a checkout). Quantities are float64 so that every spelling of a number reads the same and
// a fractional quantity stays distinguishable (and is rejected by validation).
type orderRequest struct {
	Items []struct {
		SKU      string
		Quantity float64
	}
	Email          string
	Shipping       models.Address
	ShippingMethod string
}

// decodeOrderRequest reads the significant fields of an order body by their exact names:
// items[].sku, items[].quantity, email, shipping_address.{name,address,city,postal_code,
// country} and shipping_method. Everything else ("metadata", "note", unknown members) is
// ignored.
func decodeOrderRequest(body []byte) (*orderRequest, error) {
	obj, err := jsonObject(body, "The order")
	if err != nil {
		return nil, err
	}
	var r orderRequest
	var items []map[string]json.RawMessage
	var addr map[string]json.RawMessage
	if err := member(obj, "items", "items", &items); err != nil {
		return nil, err
	}
	for i, it := range items {
		field := fmt.Sprintf("items[%d]", i)
		var line struct {
			SKU      string
			Quantity float64
		}
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

// OrderFingerprint is the FingerprintFunc of POST /api/v1/orders. Significant: each item's SKU
// and quantity (in any order), email, the shipping address and the shipping method (absent
// means "standard"). Not significant: member order, white space, number spelling, and free
// members such as "metadata" or "note".
func OrderFingerprint(body []byte) (Fingerprint, error) {
	r, err := decodeOrderRequest(body)
	if err != nil {
		return Fingerprint{}, err
	}
	return fingerprintOf(r.canonical())
}
