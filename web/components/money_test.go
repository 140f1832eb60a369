package components_test

import (
	"testing"

	"checkoutlab/web/components"
)

func TestMoney(t *testing.T) {
	tests := []struct {
		name     string
		amount   int64
		currency string
		want     string
	}{
		{"USD", 8900, "USD", "$89.00"},
		{"EUR", 2490, "EUR", "€24.90"},
		{"SmallMinor", 5, "EUR", "€0.05"},
		{"Zero", 0, "USD", "$0.00"},
		{"Thousands", 123456789, "USD", "$1,234,567.89"},
		{"ExactThousand", 100000, "GBP", "£1,000.00"},
		{"NoMinorUnits", 1500, "JPY", "¥1,500"},
		{"LowerCaseCode", 1250, "eur", "€12.50"},
		{"UnknownCurrency", 1250, "XYZ", "12.50 XYZ"},
		{"Negative", -1500, "USD", "-$15.00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := components.Money(tt.amount, tt.currency); got != tt.want {
				t.Errorf("Money(%d, %q): got %q, want %q", tt.amount, tt.currency, got, tt.want)
			}
		})
	}
}

func TestCountryName(t *testing.T) {
	for code, want := range map[string]string{"GB": "United Kingdom", "us": "United States", "DE": "Germany", "ZZ": "ZZ"} {
		if got := components.CountryName(code); got != want {
			t.Errorf("CountryName(%q): got %q, want %q", code, got, want)
		}
	}
}

func TestCardDigits(t *testing.T) {
	for number, want := range map[string]string{"4242424242424242": "4242 4242 4242 4242", "4000000000009995": "4000 0000 0000 9995", "123456": "1234 56", "": ""} {
		if got := components.CardDigits(number); got != want {
			t.Errorf("CardDigits(%q): got %q, want %q", number, got, want)
		}
	}
}
