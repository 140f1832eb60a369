package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"gorm.io/gorm"

	"checkoutlab/handlers/idempotency"
	"checkoutlab/models"
)

// OrderPlacer is what the orders API needs from the order store.
type OrderPlacer interface {
	CreateAndFinish(ctx context.Context, in models.NewOrder, finish func(tx *gorm.DB, o *models.Order) error) (*models.Order, error)
	Get(ctx context.Context, tenantID, id string) (*models.Order, error)
}

// OrdersAPI serves POST /api/v1/orders and GET /api/v1/orders/:id.
type OrdersAPI struct {
	Orders OrderPlacer
	// Idempotency runs the mutating route under the request's key.
	Idempotency *idempotency.Middleware
	// BeforeCreate, if set, runs inside the handler after the key is reserved and before the
	// business transaction. Tests use it to hold a request open (so that others overlap with
	// it), to panic, or to fail as a database would. An error it returns is the handler's.
	BeforeCreate func(ctx context.Context) error
}

// Routes mounts the order endpoints on an authenticated /api/v1 group.
// It panics if Idempotency is missing: an order endpoint without it could place an order twice.
func (h *OrdersAPI) Routes(g *echo.Group) {
	if h.Idempotency == nil {
		panic("handlers: OrdersAPI.Idempotency is required")
	}
	g.POST("/orders", h.create, h.Idempotency.Route(decodeOrder)).Name = "api.orders.create"
	g.GET("/orders/:id", h.get).Name = "api.orders.get"
}

// create places an order. The order rows, the stock reservation and the idempotency key's
// stored answer commit in one transaction, so a crash leaves either all of them or none: a
// retry then either replays the answer or places the order for the first time.
//
// Answers: 201 with the order and Location; 400 invalid_json / invalid_request; 404
// unknown_product; 409 out_of_stock (stored and replayed, like any business outcome).
func (h *OrdersAPI) create(c echo.Context) error {
	in := idempotency.RequestOf(c).(*orderRequest).newOrder()
	in.TenantID = TenantOf(c).ID
	ctx := c.Request().Context()
	if h.BeforeCreate != nil {
		if err := h.BeforeCreate(ctx); err != nil {
			return err
		}
	}

	var resp models.Response
	_, err := h.Orders.CreateAndFinish(ctx, in, func(tx *gorm.DB, o *models.Order) error {
		var err error
		if resp, err = jsonResponse(http.StatusCreated, OrderJSONOf(o)); err != nil {
			return err
		}
		resp.Header.Set(echo.HeaderLocation, OrderURL(o.ID))
		return idempotency.CompleteTx(c, tx, resp, o.ID)
	})
	if err != nil {
		return err
	}
	return writeResponse(c, resp)
}

// get returns one of the tenant's orders; another tenant's order is 404, as if absent.
func (h *OrdersAPI) get(c echo.Context) error {
	o, err := h.Orders.Get(c.Request().Context(), TenantOf(c).ID, c.Param("id"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, OrderJSONOf(o))
}

// OrderURL is the API address of an order.
func OrderURL(id string) string { return "/api/v1/orders/" + id }

// OrderJSON is an order as the API shows it, with its latest payment.
type OrderJSON struct {
	ID              string          `json:"id"`
	Status          string          `json:"status"`
	Amount          int64           `json:"amount"`
	SubtotalAmount  int64           `json:"subtotal_amount"`
	ShippingAmount  int64           `json:"shipping_amount"`
	Currency        string          `json:"currency"`
	Items           []OrderItemJSON `json:"items"`
	Email           string          `json:"email"`
	ShippingAddress models.Address  `json:"shipping_address"`
	ShippingMethod  string          `json:"shipping_method"`
	Created         string          `json:"created"` // RFC 3339, UTC, whole seconds
	// Payment is the order's latest payment, or null before the first one.
	Payment *PaymentJSON `json:"payment"`
}

// OrderItemJSON is one line of an order, with its price snapshot.
type OrderItemJSON struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	Quantity   int    `json:"quantity"`
	UnitAmount int64  `json:"unit_amount"`
	Amount     int64  `json:"amount"`
}

// OrderJSONOf builds the API view of o (its Lines must be loaded).
func OrderJSONOf(o *models.Order) OrderJSON {
	out := OrderJSON{
		ID: o.ID, Status: o.Status, Amount: o.Amount, SubtotalAmount: o.SubtotalAmount,
		ShippingAmount: o.ShippingAmount, Currency: o.Currency, Email: o.Email,
		ShippingAddress: models.Address{Name: o.ShippingName, Address: o.ShippingAddress, City: o.ShippingCity,
			PostalCode: o.ShippingPostalCode, Country: o.ShippingCountry},
		ShippingMethod: o.ShippingMethod, Created: o.CreatedAt.UTC().Truncate(time.Second).Format(time.RFC3339),
		Items: make([]OrderItemJSON, len(o.Lines)),
	}
	if n := len(o.Payments); n > 0 {
		out.Payment = PaymentJSONOf(&o.Payments[n-1])
	}
	for i, l := range o.Lines {
		out.Items[i] = OrderItemJSON{SKU: l.SKU, Name: l.Name, Quantity: l.Quantity, UnitAmount: l.UnitAmount, Amount: l.Amount}
	}
	return out
}
