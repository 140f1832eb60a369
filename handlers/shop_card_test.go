package handlers

import "testing"

func TestCheckCardNumber(t *testing.T) {
	// Every test card of the contract must pass the shape check, or the checkout form would
	// refuse the very cards it lists.
	for _, c := range testCards {
		t.Run("OK"+c.Number, func(t *testing.T) {
			if digits, problem := checkCardNumber(c.Number); problem != "" || digits != c.Number {
				t.Errorf("got (%q, %q), want (%q, \"\")", digits, problem, c.Number)
			}
		})
	}
	for _, tc := range []struct{ name, typed, want string }{
		{"OKSpacesAndDashes", "4242 4242-4242 4242", ""},
		{"ErrEmpty", "  ", "Enter a card number; the test cards are listed beside this field."},
		{"ErrLetters", "4242abcd42424242", "A card number has only digits."},
		{"ErrTooShort", "42424242424", "A card number has 12 to 19 digits."},
		{"ErrTooLong", "42424242424242424242", "A card number has 12 to 19 digits."},
		{"ErrLuhn", "4242424242424241", "This card number is not valid; check it for typos."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, problem := checkCardNumber(tc.typed); problem != tc.want {
				t.Errorf("got %q, want %q", problem, tc.want)
			}
		})
	}
}
