package fakegateway

import "strings"

// Card behaviours: what a payment method does when charged. A normal valid card succeeds; the
// test cards listed in docs/failure-modes.md decline or trigger a fault.
const (
	behaviourSucceed           = "succeed"
	behaviourCardDeclined      = "card_declined"
	behaviourInsufficientFunds = "insufficient_funds"
)

// testCards maps the documented test card numbers to their behaviour. The fault names are
// the same as the armable faults, so a card and an armed fault strike at the same point.
var testCards = map[string]string{
	"4242424242424242": behaviourSucceed,
	"4000000000000002": behaviourCardDeclined,
	"4000000000009995": behaviourInsufficientFunds,
	"4000000000000119": faultCommitThenDrop,
	"4000000000000259": faultCommitThenDelay,
	"4000000000000341": faultErrorBeforeCommit,
	"4000000000000770": faultWebhookDuplicate,
	"4000000000000788": faultWebhookReorder,
}

// card is a validated card number with what the gateway keeps of it.
type card struct {
	number    string // digits only; never logged or stored
	last4     string
	brand     string
	behaviour string
}

// parseCard strips spaces and dashes, then checks length and the Luhn checksum. It returns an
// invalid_card_number error (400) that never repeats the number.
func parseCard(raw string) (card, error) {
	number := strings.NewReplacer(" ", "", "-", "").Replace(raw)
	if number == "" {
		return card{}, badRequest("invalid_card_number", "card_number is required")
	}
	if len(number) < 12 || len(number) > 19 || strings.Trim(number, "0123456789") != "" {
		return card{}, badRequest("invalid_card_number", "card_number must be 12 to 19 digits")
	}
	if !luhnValid(number) {
		return card{}, badRequest("invalid_card_number", "card_number fails the Luhn check")
	}
	behaviour, ok := testCards[number]
	if !ok {
		behaviour = behaviourSucceed
	}
	return card{number: number, last4: number[len(number)-4:], brand: cardBrand(number), behaviour: behaviour}, nil
}

// luhnValid reports whether the digits pass the Luhn (mod 10) checksum every card number has.
func luhnValid(digits string) bool {
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// cardBrand guesses the brand from the leading digits, as providers show it.
func cardBrand(n string) string {
	switch {
	case strings.HasPrefix(n, "4"):
		return "visa"
	case strings.HasPrefix(n, "34"), strings.HasPrefix(n, "37"):
		return "amex"
	case n[0] == '5' && n[1] >= '1' && n[1] <= '5', n[:2] == "22", n[:2] == "27":
		return "mastercard"
	case strings.HasPrefix(n, "6011"), strings.HasPrefix(n, "65"):
		return "discover"
	default:
		return "unknown"
	}
}

// currencies is the fixed list of ISO 4217 codes the gateway accepts.
var currencies = map[string]bool{
	"AUD": true, "BRL": true, "CAD": true, "CHF": true, "CNY": true, "CZK": true, "DKK": true,
	"EUR": true, "GBP": true, "HKD": true, "HUF": true, "INR": true, "JPY": true, "MXN": true,
	"NOK": true, "NZD": true, "PLN": true, "SEK": true, "SGD": true, "USD": true, "ZAR": true,
}
