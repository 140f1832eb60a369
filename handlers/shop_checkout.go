package handlers

import (
	"maps"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
	"checkoutlab/web/components"
	"checkoutlab/web/pages"
)

// checkoutForm is the checkout form as posted. CardNumber lives only in this struct for the
// length of the request.
type checkoutForm struct {
	Email, Name, Address, City, PostalCode, Country string
	ShippingMethod, CardNumber                      string
	IdempotencyKey, CartID                          string
}

func readCheckoutForm(c echo.Context) checkoutForm {
	return checkoutForm{
		Email: c.FormValue("email"), Name: c.FormValue("name"), Address: c.FormValue("address"),
		City: c.FormValue("city"), PostalCode: c.FormValue("postal_code"), Country: c.FormValue("country"),
		ShippingMethod: c.FormValue("shipping_method"), CardNumber: c.FormValue("card_number"),
		IdempotencyKey: c.FormValue("idempotency_key"), CartID: c.FormValue("cart_id"),
	}
}

// request turns the form and the cart it was shown for into the checkout request, and checks
// it — once, as the order store and the card check will — keyed by form field: no field
// errors means the request is valid.
func (f checkoutForm) request(cart *models.Cart, session string) (*checkoutRequest, map[string]string) {
	order := &orderRequest{Email: f.Email, ShippingMethod: f.ShippingMethod,
		Shipping: models.Address{Name: f.Name, Address: f.Address, City: f.City, PostalCode: f.PostalCode, Country: f.Country}}
	for _, l := range cart.Lines {
		order.Items = append(order.Items, orderItem{SKU: l.Product.SKU, Quantity: float64(l.Quantity)})
	}
	fields := map[string]string{}
	in := order.newOrder()
	if err := in.Validate(); err != nil {
		maps.Copy(fields, models.ErrorOf(err).Fields)
	}
	if _, known := countryNames[in.Shipping.Country]; !known && fields["country"] == "" {
		fields["country"] = "Choose a country from the list."
	}
	card, problem := checkCardNumber(f.CardNumber)
	if problem != "" {
		fields["card_number"] = problem
	}
	return &checkoutRequest{order: order, card: card, cartID: cart.ID, sessionID: session}, fields
}

// checkoutForm renders the checkout form for the session's cart; an empty cart sends the
// customer back to the cart page with a message. The idempotency key is made here, once per
// view of the form, and comes back with every submit of it.
func (s *Storefront) checkoutForm(c echo.Context) error {
	t := TenantOf(c)
	cart, err := s.Carts.Current(c.Request().Context(), t.ID, SessionOf(c))
	if err != nil {
		return err
	}
	if len(cart.Lines) == 0 {
		// A reload while a checkout is still being confirmed finds the cart already turned
		// into an order: show that order (it says it is confirming) rather than an empty cart.
		recent, err := s.Orders.ListForSession(c.Request().Context(), t.ID, SessionOf(c))
		if err != nil {
			return err
		}
		if len(recent) > 0 && recent[0].Status == models.OrderPendingPayment {
			return c.Redirect(http.StatusSeeOther, pathFor(c, routeOrder, recent[0].ID))
		}
		return c.Redirect(http.StatusSeeOther, withNotice(pathFor(c, routeCart, t.ID), "empty"))
	}
	_, currency := cart.Total()
	form := checkoutForm{Country: defaultCountry(currency), ShippingMethod: models.ShippingStandard,
		IdempotencyKey: models.NewID("idem"), CartID: cart.ID}
	vm, err := s.checkoutPage(c, cart, form, nil, "")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, pages.Checkout(vm))
}

func (s *Storefront) rerenderCheckout(c echo.Context, cart *models.Cart, form checkoutForm, fields map[string]string, msg string, status int) error {
	vm, err := s.checkoutPage(c, cart, form, fields, msg)
	if err != nil {
		return err
	}
	return render(c, status, pages.Checkout(vm))
}

// checkoutPage builds the checkout view model: the form with its values and errors, and the
// order summary for the cart.
func (s *Storefront) checkoutPage(c echo.Context, cart *models.Cart, form checkoutForm, fields map[string]string, msg string) (pages.CheckoutPage, error) {
	t := TenantOf(c)
	lay, err := s.layoutFor(c, t, "Checkout", cart.ItemCount())
	if err != nil {
		return pages.CheckoutPage{}, err
	}
	lay.Scripts = []string{"/static/js/checkout.js"}
	subtotal, currency := cart.Total()
	if form.IdempotencyKey == "" {
		form.IdempotencyKey = models.NewID("idem")
	}
	vm := pages.CheckoutPage{
		Layout: lay, CSRF: CSRFToken(c), Action: pathFor(c, routeCheckoutPlace, t.ID), CartURL: pathFor(c, routeCart, t.ID),
		CartID: cart.ID, IdempotencyKey: form.IdempotencyKey, Error: msg,
		Email: components.Field{Name: "email", Label: "E-mail", Type: "email", Value: form.Email, Error: fields["email"],
			Autocomplete: "email", Required: true},
		Name: components.Field{Name: "name", Label: "Full name", Value: form.Name, Error: fields["name"],
			Autocomplete: "name", Required: true},
		Address: components.Field{Name: "address", Label: "Street address", Value: form.Address, Error: fields["address"],
			Autocomplete: "street-address", Required: true},
		City: components.Field{Name: "city", Label: "City", Value: form.City, Error: fields["city"],
			Autocomplete: "address-level2", Required: true},
		PostalCode: components.Field{Name: "postal_code", Label: "Postal code", Value: form.PostalCode, Error: fields["postal_code"],
			Autocomplete: "postal-code", Required: true},
		Country:       components.Field{Name: "country", Label: "Country", Value: form.Country, Error: fields["country"]},
		ShippingError: fields["shipping_method"],
		CardNumber: components.Field{Name: "card_number", Label: "Card number", Value: form.CardNumber, Error: fields["card_number"],
			Autocomplete: "cc-number", InputMode: "numeric", Required: true,
			Hint: "Test mode: pick a card from the table. The shop never stores card numbers."},
		TestCards: testCards,
		Subtotal:  components.Money(subtotal, currency),
	}
	if fields["items"] != "" && vm.Error != "" {
		vm.Error += " " + fields["items"]
	}
	country := strings.ToUpper(strings.TrimSpace(form.Country))
	for _, cc := range countries {
		vm.Countries = append(vm.Countries, pages.Option{Value: cc.Code, Label: cc.Name, Selected: cc.Code == country})
	}
	method := strings.TrimSpace(form.ShippingMethod)
	if method != models.ShippingExpress {
		method = models.ShippingStandard
	}
	for _, m := range []struct{ value, label, detail string }{
		{models.ShippingStandard, "Standard", "3–5 business days"},
		{models.ShippingExpress, "Express", "1–2 business days"},
	} {
		cost := models.ShippingCost(m.value)
		price := shippingPrice(cost, currency)
		vm.Shipping = append(vm.Shipping, pages.ShippingOption{Value: m.value, Label: m.label, Detail: m.detail,
			Price: price, Total: components.Money(subtotal+cost, currency), Selected: m.value == method})
	}
	for _, l := range cart.Lines {
		vm.Lines = append(vm.Lines, pages.SummaryLine{Name: l.Product.Name, Quantity: l.Quantity,
			Amount: components.Money(l.Amount(), l.Product.Currency)})
	}
	return vm, nil
}

// testCards are the fake gateway's test cards (docs/failure-modes.md lists what each does),
// listed beside the card field so a learner can pick a failure to try.
var testCards = []pages.TestCard{
	{Number: "4242424242424242", Effect: "Succeeds"},
	{Number: "4000000000000002", Effect: "Declined (card_declined)"},
	{Number: "4000000000009995", Effect: "Declined (insufficient_funds)"},
	{Number: "4000000000000119", Effect: "Charged, then the response is lost"},
	{Number: "4000000000000259", Effect: "Charged, then the response comes too late"},
	{Number: "4000000000000341", Effect: "Gateway error before charging"},
	{Number: "4000000000000770", Effect: "Webhooks delivered several times"},
	{Number: "4000000000000788", Effect: "Webhooks arrive out of order"},
}

// countries are the shipping destinations offered, as ISO 3166-1 alpha-2 codes; receipts name
// them from the same list.
var countries = components.Countries

var countryNames = func() map[string]string {
	m := make(map[string]string, len(countries))
	for _, c := range countries {
		m[c.Code] = c.Name
	}
	return m
}()

// defaultCountry preselects a country that fits the shop's currency; the customer can change it.
func defaultCountry(currency string) string {
	switch currency {
	case "USD":
		return "US"
	case "EUR":
		return "DE"
	case "GBP":
		return "GB"
	}
	return ""
}
