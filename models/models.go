package models

import "time"

// Tenant is one merchant. API calls authenticate as a tenant; the tenant never comes from a
// request body.
type Tenant struct {
	ID         string `gorm:"primaryKey"`
	Name       string
	APIKeyHash string `gorm:"column:api_key_hash"`
	CreatedAt  time.Time
}

// Product is one catalogue entry of a tenant. Amount is the unit price in minor units.
type Product struct {
	ID          int64 `gorm:"primaryKey"`
	TenantID    string
	SKU         string `gorm:"column:sku"`
	Name        string
	Description string
	Image       string
	Amount      int64
	Currency    string
	Stock       int
	CreatedAt   time.Time
}

// Cart statuses.
const (
	CartOpen      = "open"
	CartConverted = "converted"
)

// Cart is a browser session's basket in one tenant's storefront.
type Cart struct {
	ID        string `gorm:"primaryKey"`
	TenantID  string
	SessionID string
	Status    string
	Lines     []CartLine `gorm:"foreignKey:CartID"`
	CreatedAt time.Time
	UpdatedAt time.Time
}

// CartLine is one product and quantity in a cart.
type CartLine struct {
	CartID    string `gorm:"primaryKey"`
	ProductID int64  `gorm:"primaryKey"`
	Product   Product
	Quantity  int
	CreatedAt time.Time
}

// Amount is the line total in minor units.
func (l CartLine) Amount() int64 { return l.Product.Amount * int64(l.Quantity) }

// Total is the cart's sum in minor units, and its currency ("" for an empty cart).
func (c *Cart) Total() (int64, string) {
	var total int64
	currency := ""
	for _, l := range c.Lines {
		total += l.Amount()
		currency = l.Product.Currency
	}
	return total, currency
}

// ItemCount is the number of units in the cart.
func (c *Cart) ItemCount() int {
	n := 0
	for _, l := range c.Lines {
		n += l.Quantity
	}
	return n
}

// Order statuses. An order moves pending_payment → paid, or pending_payment → payment_failed
// → paid (a new payment with another card); it never moves back.
const (
	OrderPendingPayment = "pending_payment"
	OrderPaymentFailed  = "payment_failed"
	OrderPaid           = "paid"
)

// Shipping methods and what they cost, in minor units of the order's currency.
const (
	ShippingStandard = "standard"
	ShippingExpress  = "express"
)

// ShippingCost is the price of a shipping method, in minor units.
func ShippingCost(method string) int64 {
	if method == ShippingExpress {
		return 1500
	}
	return 0
}

// Order is a confirmed purchase awaiting or having received payment.
type Order struct {
	ID                 string `gorm:"primaryKey"`
	TenantID           string
	CartID             *string
	SessionID          *string
	Email              string
	ShippingName       string
	ShippingAddress    string
	ShippingCity       string
	ShippingPostalCode string
	ShippingCountry    string
	ShippingMethod     string
	SubtotalAmount     int64
	ShippingAmount     int64
	Amount             int64
	Currency           string
	Status             string
	Lines              []OrderLine `gorm:"foreignKey:OrderID"`
	Payments           []Payment   `gorm:"foreignKey:OrderID"`
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

// OrderLine snapshots a product's name and price at the time of the order.
type OrderLine struct {
	OrderID    string `gorm:"primaryKey"`
	LineNo     int    `gorm:"primaryKey"`
	ProductID  int64
	SKU        string `gorm:"column:sku"`
	Name       string
	UnitAmount int64
	Quantity   int
	Amount     int64
}

// Payment statuses. pending means the outcome is not known yet; it is never reported as a
// failure, because that would invite the customer to pay again.
const (
	PaymentPending   = "pending"
	PaymentSucceeded = "succeeded"
	PaymentFailed    = "failed"
	PaymentRefunded  = "refunded"
)

// Payment is one attempt to pay an order with one payment method.
type Payment struct {
	ID              string `gorm:"primaryKey"`
	TenantID        string
	OrderID         string
	Status          string
	Amount          int64
	Currency        string
	PaymentMethodID string
	CardLast4       string `gorm:"column:card_last4"`
	CardBrand       string
	GatewayKey      string
	GatewayChargeID *string
	DeclineCode     string
	CreatedAt       time.Time
	UpdatedAt       time.Time
}
