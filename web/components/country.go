package components

import "strings"

// Country is one shipping destination: an ISO 3166-1 alpha-2 code and its English name.
type Country struct{ Code, Name string }

// Countries are the destinations the shop ships to, in the order a form lists them.
var Countries = []Country{
	{"AU", "Australia"}, {"AT", "Austria"}, {"BE", "Belgium"}, {"CA", "Canada"}, {"DK", "Denmark"},
	{"FR", "France"}, {"DE", "Germany"}, {"IE", "Ireland"}, {"IT", "Italy"}, {"JP", "Japan"},
	{"NL", "Netherlands"}, {"ES", "Spain"}, {"SE", "Sweden"}, {"CH", "Switzerland"},
	{"GB", "United Kingdom"}, {"US", "United States"},
}

// CountryName writes a country code for people: CountryName("GB") = "United Kingdom". A code
// the shop does not ship to comes back as it is (upper-cased), so nothing is ever hidden.
func CountryName(code string) string {
	code = strings.ToUpper(strings.TrimSpace(code))
	for _, c := range Countries {
		if c.Code == code {
			return c.Name
		}
	}
	return code
}
