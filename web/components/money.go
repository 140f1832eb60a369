// Package components holds small templ components and the formatting helpers that view models
// use. Everything here is a pure function of its arguments.
package components

import (
	"strconv"
	"strings"
)

// currencyFormat says how one currency is written: its symbol and how many minor units it has.
type currencyFormat struct {
	symbol string
	digits int
}

var currencies = map[string]currencyFormat{
	"USD": {"$", 2}, "EUR": {"€", 2}, "GBP": {"£", 2}, "CHF": {"CHF ", 2},
	"CAD": {"CA$", 2}, "AUD": {"A$", 2}, "JPY": {"¥", 0}, "SEK": {"SEK ", 2},
}

// Money formats an amount in minor units for display, e.g. Money(8900, "USD") = "$89.00" and
// Money(2490, "EUR") = "€24.90".
//
// The rule is one for every currency, so the whole shop reads the same whatever the tenant:
// the currency's symbol first, then the amount with "," between thousands and "." before the
// minor units (English notation, the page's language). Currencies without a known symbol are
// written as "12.50 XYZ" with two minor digits. Negative amounts get a leading "-".
func Money(amount int64, currency string) string {
	currency = strings.ToUpper(currency)
	f, known := currencies[currency]
	if !known {
		f = currencyFormat{digits: 2}
	}
	sign := ""
	if amount < 0 {
		sign, amount = "-", -amount
	}
	unit := int64(1)
	for range f.digits {
		unit *= 10
	}
	s := groupThousands(strconv.FormatInt(amount/unit, 10))
	if f.digits > 0 {
		minor := strconv.FormatInt(amount%unit, 10)
		s += "." + strings.Repeat("0", f.digits-len(minor)) + minor
	}
	if !known {
		return sign + s + " " + currency
	}
	return sign + f.symbol + s
}

// groupThousands inserts "," every three digits from the right: "1234567" → "1,234,567".
func groupThousands(digits string) string {
	if len(digits) <= 3 {
		return digits
	}
	var b strings.Builder
	lead := len(digits) % 3
	if lead > 0 {
		b.WriteString(digits[:lead])
	}
	for i := lead; i < len(digits); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(digits[i : i+3])
	}
	return b.String()
}
