package handlers_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"checkoutlab/handlers"
	"checkoutlab/models"
)

// MustFingerprint returns body's order fingerprint hash.
func MustFingerprint(tb testing.TB, body string) string {
	tb.Helper()
	fp, err := handlers.OrderFingerprint([]byte(body))
	if err != nil {
		tb.Fatalf("fingerprint of %s: %v", body, err)
	}
	return fp.Hash
}

func TestOrderFingerprint(t *testing.T) {
	base := MustFingerprint(t, orderBody)

	t.Run("Equal", func(t *testing.T) {
		for name, body := range map[string]string{
			"Respelled":           orderBodyRespelled,
			"ExplicitStandard":    strings.Replace(orderBody, `"email"`, `"shipping_method":"standard","email"`, 1),
			"Note":                strings.Replace(orderBody, `"email"`, `"note":"ring twice","email"`, 1),
			"SurroundingSpace":    strings.Replace(orderBody, `"London"`, `" London "`, 1),
			"UnknownItemMember":   strings.Replace(orderBody, `"quantity":1}`, `"quantity":1,"gift":true}`, 1),
			"NullMetadata":        strings.Replace(orderBody, `"email"`, `"metadata":null,"email"`, 1),
			"DuplicateMemberLast": strings.Replace(orderBody, `"email"`, `"email":"x@example.com","email"`, 1),
		} {
			if got := MustFingerprint(t, body); got != base {
				t.Errorf("%s: got a different fingerprint, want the same", name)
			}
		}
	})
	t.Run("Different", func(t *testing.T) {
		for name, body := range map[string]string{
			"Quantity":       strings.Replace(orderBody, `"quantity":2`, `"quantity":3`, 1),
			"FractionalQty":  strings.Replace(orderBody, `"quantity":2`, `"quantity":2.5`, 1),
			"SKU":            strings.Replace(orderBody, "headlamp", "rain-shell", 1),
			"ExtraItem":      strings.Replace(orderBody, `]`, `,{"sku":"merino-beanie","quantity":1}]`, 1),
			"Email":          strings.Replace(orderBody, "ada@", "ada2@", 1),
			"Name":           strings.Replace(orderBody, "Ada Lovelace", "Ada Byron", 1),
			"Address":        strings.Replace(orderBody, "1 Analytical", "2 Analytical", 1),
			"City":           strings.Replace(orderBody, "London", "Leeds", 1),
			"PostalCode":     strings.Replace(orderBody, "N1 9GU", "N1 9GV", 1),
			"Country":        strings.Replace(orderBody, `"GB"`, `"IE"`, 1),
			"ShippingMethod": strings.Replace(orderBody, `"email"`, `"shipping_method":"express","email"`, 1),
			"KeyCase":        strings.Replace(orderBody, `"email"`, `"EMAIL"`, 1), // names are exact
		} {
			if got := MustFingerprint(t, body); got == base {
				t.Errorf("%s: got the same fingerprint, want a different one", name)
			}
		}
	})
	t.Run("Errors", func(t *testing.T) {
		for name, tc := range map[string]struct{ body, code string }{
			"InvalidJSON":   {`{"items": [`, "invalid_json"},
			"TrailingData":  {orderBody + `}`, "invalid_json"},
			"NotAnObject":   {`["camp-mug"]`, "invalid_request"},
			"QuantityText":  {strings.Replace(orderBody, `"quantity":2`, `"quantity":"2"`, 1), "invalid_request"},
			"ItemsNotArray": {`{"items":{"sku":"camp-mug"}}`, "invalid_request"},
		} {
			_, err := handlers.OrderFingerprint([]byte(tc.body))
			if got := models.ErrorOf(err).Code; err == nil || got != tc.code {
				t.Errorf("%s: got %v, want %s", name, err, tc.code)
			}
		}
	})
	t.Run("ParamsAreCanonical", func(t *testing.T) {
		fp, _ := handlers.OrderFingerprint([]byte(orderBodyRespelled))
		want := `{"items":[{"sku":"camp-mug","quantity":2},{"sku":"headlamp","quantity":1}],"email":"ada@example.com",` +
			`"shipping_address":{"name":"Ada Lovelace","address":"1 Analytical Way","city":"London","postal_code":"N1 9GU","country":"GB"},` +
			`"shipping_method":"standard"}`
		if string(fp.Params) != want {
			t.Errorf("params: got %s, want %s", fp.Params, want)
		}
	})
}

// FuzzOrderFingerprint checks the two promises of the canonical form on arbitrary bodies:
// the same meaning spelled otherwise (member order, white space, number spelling, item order,
// free fields) gives the same fingerprint, and a change of a significant field (a quantity, the
// e-mail) gives a different one. Seeds live in testdata/fuzz/FuzzOrderFingerprint.
//
//	go test ./handlers -run XXX -fuzz FuzzOrderFingerprint -fuzztime 60s
func FuzzOrderFingerprint(f *testing.F) {
	f.Add([]byte(orderBody))
	f.Fuzz(func(t *testing.T, body []byte) {
		fp, err := handlers.OrderFingerprint(body)
		if err != nil {
			return // not an order body: the middleware answers 400 and stores nothing
		}
		obj := decodeGeneric(t, body)

		// Same meaning, other spelling.
		obj["metadata"] = map[string]any{"fuzz": true}
		obj["note"] = "free text"
		items, _ := obj["items"].([]any)
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
		}
		for _, it := range items {
			if m, ok := it.(map[string]any); ok {
				if n, ok := m["quantity"].(json.Number); ok {
					if v, err := n.Float64(); err == nil {
						m["quantity"] = json.Number(strconv.FormatFloat(v, 'e', -1, 64))
					}
				}
			}
		}
		respelled, err := json.MarshalIndent(obj, " ", "\t")
		if err != nil {
			t.Fatal(err)
		}
		if got := mustHash(t, respelled); got != fp.Hash {
			t.Fatalf("respelled body %s: got another fingerprint than %s", respelled, body)
		}

		// A significant change: one more of the first item.
		if len(items) > 0 {
			if m, ok := items[0].(map[string]any); ok {
				if n, ok := m["quantity"].(json.Number); ok {
					if v, err := n.Float64(); err == nil && v > -1e6 && v < 1e6 {
						m["quantity"] = json.Number(strconv.FormatFloat(v+1, 'f', -1, 64))
						changed, _ := json.Marshal(obj)
						if mustHash(t, changed) == fp.Hash {
							t.Fatalf("changed quantity %s: got the same fingerprint as %s", changed, body)
						}
						m["quantity"] = n
					}
				}
			}
		}
		// Another significant change: the e-mail address.
		if email, ok := obj["email"].(string); ok || obj["email"] == nil {
			obj["email"] = email + "x"
			changed, _ := json.Marshal(obj)
			if mustHash(t, changed) == fp.Hash {
				t.Fatalf("changed email %s: got the same fingerprint as %s", changed, body)
			}
		}
	})
}

func decodeGeneric(t *testing.T, body []byte) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		t.Fatalf("accepted body does not decode generically: %v", err)
	}
	if obj == nil {
		obj = map[string]any{}
	}
	return obj
}

func mustHash(t *testing.T, body []byte) string {
	fp, err := handlers.OrderFingerprint(body)
	if err != nil {
		t.Fatalf("fingerprint of %s: %v", body, err)
	}
	return fp.Hash
}
