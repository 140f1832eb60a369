package pages

import (
	"checkoutlab/web/components"
	"checkoutlab/web/layout"
)

// The storefront's view models. Handlers build them from the stores' results; the templates
// only read them. Money arrives already formatted.

// ProductCard is one product in the catalogue grid or on its own page.
type ProductCard struct {
	SKU         string
	Name        string
	Description string
	Image       string
	Price       string
	URL         string
	AddURL      string // POST target of the add-to-cart form
	InStock     bool
	LowStock    bool // a few left: shown as a hint
	Stock       int
}

// CataloguePage is a tenant's product grid.
type CataloguePage struct {
	Layout   layout.Page
	CSRF     string
	Heading  string
	Products []ProductCard
}

// ProductPage is one product.
type ProductPage struct {
	Layout  layout.Page
	CSRF    string
	Product ProductCard
	BackURL string
}

// CartLine is one line of the cart page.
type CartLine struct {
	SKU       string
	Name      string
	Image     string
	URL       string
	Quantity  int
	UnitPrice string
	LineTotal string
	UpdateURL string
	DeleteURL string
}

// CartPage is the session's cart.
type CartPage struct {
	Layout      layout.Page
	CSRF        string
	Lines       []CartLine
	Subtotal    string
	ItemCount   int
	CheckoutURL string
	ShopURL     string
	MaxQuantity int
}

// Option is one choice of a select or radio group.
type Option struct {
	Value    string
	Label    string
	Selected bool
}

// TestCard is one row of the test card table beside the card field.
type TestCard struct {
	Number string
	Effect string
}

// SummaryLine is one line of an order summary.
type SummaryLine struct {
	Name     string
	Quantity int
	Amount   string
}

// CheckoutPage is the checkout form with the order summary.
type CheckoutPage struct {
	Layout         layout.Page
	CSRF           string
	Action         string
	CartURL        string
	CartID         string
	IdempotencyKey string
	// Error is the form-level message when validation failed.
	Error         string
	Email         components.Field
	Name          components.Field
	Address       components.Field
	City          components.Field
	PostalCode    components.Field
	Country       components.Field // Value and Error; the options are in Countries
	Countries     []Option
	Shipping      []ShippingOption
	ShippingError string
	CardNumber    components.Field
	TestCards     []TestCard
	Lines         []SummaryLine
	Subtotal      string
}

// ShippingOption is one shipping method radio.
type ShippingOption struct {
	Value    string
	Label    string
	Detail   string
	Price    string
	Total    string // order total with this method
	Selected bool
}

// Payment is one payment attempt shown on the confirmation page.
type Payment struct {
	Status string
	Amount string
	Card   string // "•••• 4242"
}

// OrderPage is the order confirmation.
type OrderPage struct {
	Layout       layout.Page
	Heading      string
	ID           string
	Status       string // in words
	StatusClass  string // pending | paid | failed
	Email        string
	Placed       string
	Lines        []SummaryLine
	Subtotal     string
	Shipping     string
	ShipMethod   string
	Total        string
	AddressLines []string
	Payments     []Payment
	// Confirming is true while a payment's outcome is not known yet; the page then refreshes
	// itself until the webhook or the completer settles it.
	Confirming bool
	// Declined explains the latest decline, if the order is waiting for another card.
	Declined string
	// Pay is the "pay with another card" form, shown when the order can take a new payment.
	Pay       *PayForm
	ShopURL   string
	OrdersURL string
	// Journal is what happened to the order, oldest first (the ops view); empty hides it.
	Journal []JournalRow
	// Recovered says, when the gateway's answer was lost and the order was still charged only
	// once, that the shop recovered ("Response lost — recovered, charged once").
	Recovered string
	// JournalPage says which part of a long journal Journal is, with links to the rest.
	JournalPage JournalPage
}

// JournalPage says which events of a long journal a page shows, with links to the others.
type JournalPage struct {
	Showing string // "12 events", or "events 101–200 of 4012"
	Earlier string // the page before; "" on the first
	Later   string // the page after; "" on the last
	Open    bool   // the reader asked for a page of it: show the journal unfolded
	// Poll, while the order's operation is young (its last event a few seconds old, or a
	// payment still pending), is where the events refresh from every two seconds: the
	// webhook, the receipt and the shipment arrive after the answer. "" once it is quiet.
	Poll string
}

// JournalRow is one event of an order's journal, as shown in "What happened".
type JournalRow struct {
	At     string // UTC, with milliseconds
	Actor  string // client, shop, database, gateway, webhook, outbox, completer
	Event  string
	Detail string
	// ChargeID is the gateway charge the event names, if any; ChargeURL its ledger row.
	ChargeID, ChargeURL string
}

// OrderSummary is one row of the order history.
type OrderSummary struct {
	ID          string
	URL         string
	Summary     string // what was bought, e.g. "Rain Shell Jacket, Trail Pack 30L × 2"
	Placed      string
	Items       int
	Total       string
	Status      string
	StatusClass string
}

// OrdersPage is the session's order history in one store.
type OrdersPage struct {
	Layout  layout.Page
	Orders  []OrderSummary
	ShopURL string
}

// PayForm pays an order with another card: a new operation, with a new idempotency key made
// when the form is rendered.
type PayForm struct {
	Action         string
	CSRF           string
	IdempotencyKey string
	Total          string
}
