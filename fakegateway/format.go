package fakegateway

import (
	"fmt"
	"strings"
)

// The page's own formatting. The gateway is another company: it writes amounts its own way
// (currency code, then major units) and shares no code with the shop.

// zeroDecimal are the currencies without minor units that the gateway knows.
var zeroDecimal = map[string]bool{"JPY": true, "KRW": true}

// money writes amount minor units of currency: money(2800, "usd") = "USD 28.00".
func money(amount int64, currency string) string {
	currency = strings.ToUpper(currency)
	sign := ""
	if amount < 0 {
		sign, amount = "-", -amount
	}
	if zeroDecimal[currency] {
		return fmt.Sprintf("%s %s%d", currency, sign, amount)
	}
	return fmt.Sprintf("%s %s%d.%02d", currency, sign, amount/100, amount%100)
}

// cardDigits writes a card number in groups of four: "4242424242424242" = "4242 4242 4242 4242".
func cardDigits(number string) string {
	var b strings.Builder
	for i, r := range number {
		if i > 0 && i%4 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}
