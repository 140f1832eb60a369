package handlers

import "strings"

// checkCardNumber checks the shape of a card number as typed: 12 to 19 digits (spaces and
// dashes allowed between them) whose Luhn checksum is right. It returns the digits alone, or
// a message for the form. The number itself goes no further than the OrderPlacer: it is never
// stored, logged, or put into an error.
func checkCardNumber(typed string) (digits, problem string) {
	digits = strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' {
			return -1
		}
		return r
	}, strings.TrimSpace(typed))
	switch {
	case digits == "":
		return "", "Enter a card number; the test cards are listed beside this field."
	case strings.Trim(digits, "0123456789") != "":
		return "", "A card number has only digits."
	case len(digits) < 12 || len(digits) > 19:
		return "", "A card number has 12 to 19 digits."
	case !luhnValid(digits):
		return "", "This card number is not valid; check it for typos."
	}
	return digits, ""
}

// luhnValid reports whether a string of digits passes the Luhn check that every card number
// carries: doubling every second digit from the right, the sum is a multiple of 10.
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
