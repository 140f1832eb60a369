package components

import "strings"

// CardDigits writes a card number in groups of four, as it is printed on a card:
// CardDigits("4242424242424242") = "4242 4242 4242 4242".
func CardDigits(number string) string {
	var b strings.Builder
	for i, r := range number {
		if i > 0 && i%4 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}
