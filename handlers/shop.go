package handlers

import (
	"context"
	"fmt"
	"net/url"

	"github.com/labstack/echo/v4"

	"checkoutlab/handlers/idempotency"
	"checkoutlab/models"
	"checkoutlab/web/layout"
)

// The storefront's view of the stores: each interface lists only the methods it calls, so a
// test can swap one in without touching the others.

// ShopTenants finds the storefront's tenants.
type ShopTenants interface {
	Get(ctx context.Context, id string) (*models.Tenant, error)
	List(ctx context.Context) ([]models.Tenant, error)
}

// ShopProducts reads a tenant's catalogue.
type ShopProducts interface {
	List(ctx context.Context, tenantID string) ([]models.Product, error)
	BySKU(ctx context.Context, tenantID, sku string) (*models.Product, error)
}

// ShopCarts keeps the session's cart.
type ShopCarts interface {
	Current(ctx context.Context, tenantID, sessionID string) (*models.Cart, error)
	Add(ctx context.Context, tenantID, sessionID, sku string, quantity int) error
	SetQuantity(ctx context.Context, tenantID, sessionID, sku string, quantity int) error
	Remove(ctx context.Context, tenantID, sessionID, sku string) error
	ByID(ctx context.Context, tenantID, sessionID, cartID string) (*models.Cart, error)
}

// ShopOrders reads orders for the confirmation page, the history and double submits.
type ShopOrders interface {
	GetAnyTenant(ctx context.Context, id string) (*models.Order, error)
	ListForSession(ctx context.Context, tenantID, sessionID string) ([]models.Order, error)
	ByCart(ctx context.Context, tenantID, cartID string) (*models.Order, error)
}

// Storefront serves the browser shop: catalogue, product pages, cart, checkout, order
// confirmation and order history, for every tenant.
type Storefront struct {
	Tenants  ShopTenants
	Products ShopProducts
	Carts    ShopCarts
	Orders   ShopOrders
	// Payments runs the checkout and payment operations, exactly as for the API, under the
	// same idempotency middleware; Cards fingerprints their cards.
	Payments    PaymentOperations
	Idempotency *idempotency.Middleware
	Cards       CardFingerprint
	Keys        KeyLookup
	// Journal, when set, shows "What happened" on the order page: the order's journal.
	Journal OrderJournalPages
	// DefaultTenant is the store "/" shows; "acme" when empty.
	DefaultTenant string
}

// OrderJournal reads an order's journal, oldest first. *models.JournalStore is one.
type OrderJournal interface {
	ForOrder(ctx context.Context, orderID string) ([]models.JournalEvent, error)
}

// OrderJournalPages reads an order's journal a page at a time, for the order page, whose
// journal may be long. *models.JournalStore is one.
type OrderJournalPages interface {
	ForOrderPage(ctx context.Context, orderID string, offset, limit int) (models.JournalPage, error)
}

// Route names, for c.Echo().Reverse.
const (
	routeHome            = "shop.home"
	routeCatalogue       = "shop.catalogue"
	routeProduct         = "shop.product"
	routeCart            = "shop.cart"
	routeCartAdd         = "shop.cart.add"
	routeCartSet         = "shop.cart.set"
	routeCartDelete      = "shop.cart.delete"
	routeCheckout        = "shop.checkout"
	routeCheckoutPlace   = "shop.checkout.place"
	routeCheckoutPending = "shop.checkout.pending"
	routeOrders          = "shop.orders"
	routeOrderPay        = "shop.order.pay"
	routeOrder           = "shop.order"
)

// Routes mounts the storefront. Session and CSRF middleware wrap these routes only: the JSON
// API authenticates with API keys and has no cookies to protect.
func (s *Storefront) Routes(e *echo.Echo) {
	session, csrf := SessionMiddleware(), CSRF()
	e.GET("/", s.home, session, csrf).Name = routeHome
	e.GET("/orders/:id", s.order, session, csrf).Name = routeOrder

	g := e.Group("/shop/:tenant", session, csrf, s.loadTenant)
	g.GET("", s.catalogue).Name = routeCatalogue
	g.GET("/products/:sku", s.product).Name = routeProduct
	g.GET("/cart", s.cart).Name = routeCart
	g.POST("/cart/items", s.addItem).Name = routeCartAdd
	g.POST("/cart/items/:sku", s.setQuantity).Name = routeCartSet
	g.POST("/cart/items/:sku/delete", s.removeItem).Name = routeCartDelete
	g.GET("/checkout", s.checkoutForm).Name = routeCheckout
	g.POST("/checkout", s.placeOrder).Name = routeCheckoutPlace
	g.GET("/checkout/pending", s.pending).Name = routeCheckoutPending
	g.GET("/orders", s.orders).Name = routeOrders
	g.POST("/orders/:id/pay", s.payOrder).Name = routeOrderPay
}

// loadTenant puts the tenant named in the path on the context; an unknown one is a 404 page.
func (s *Storefront) loadTenant(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		t, err := s.Tenants.Get(c.Request().Context(), c.Param("tenant"))
		if err != nil {
			return err
		}
		c.Set(ctxTenant, t)
		return next(c)
	}
}

func (s *Storefront) defaultTenant() string {
	if s.DefaultTenant == "" {
		return "acme"
	}
	return s.DefaultTenant
}

// pathFor builds the path of a named route, escaping each parameter.
func pathFor(c echo.Context, name string, params ...string) string {
	args := make([]any, len(params))
	for i, p := range params {
		args[i] = url.PathEscape(p)
	}
	return c.Echo().Reverse(name, args...)
}

// layoutFor builds the header of a page in the tenant's store. cartCount < 0 means "look it
// up", so pages that already loaded the cart do not load it twice.
func (s *Storefront) layoutFor(c echo.Context, t *models.Tenant, title string, cartCount int) (layout.Page, error) {
	ctx := c.Request().Context()
	if cartCount < 0 {
		cart, err := s.Carts.Current(ctx, t.ID, SessionOf(c))
		if err != nil {
			return layout.Page{}, err
		}
		cartCount = cart.ItemCount()
	}
	tenants, err := s.Tenants.List(ctx)
	if err != nil {
		return layout.Page{}, err
	}
	p := layout.Page{Title: title, StoreName: t.Name, StorePath: pathFor(c, routeCatalogue, t.ID), CartCount: cartCount,
		Notice: notices[c.QueryParam("notice")]}
	for _, other := range tenants {
		p.Stores = append(p.Stores, layout.StoreLink{Name: other.Name, URL: pathFor(c, routeCatalogue, other.ID), Current: other.ID == t.ID})
	}
	return p, nil
}

// notices are the one-line messages a redirect can ask the next page to show. Only these
// fixed texts can appear, so a crafted link cannot put words in the shop's mouth.
var notices = map[string]string{
	"added":           "Added to your cart.",
	"updated":         "Your cart was updated.",
	"removed":         "Removed from your cart.",
	"empty":           "Your cart is empty: add something before you check out.",
	"bad_card":        "That card number is not valid. Check it and try again.",
	"checkout_failed": "Your order could not be placed. Nothing was charged.",
}

// isHTMX reports whether htmx sent the request, which then gets a partial instead of a redirect.
func isHTMX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

func withNotice(path, notice string) string { return fmt.Sprintf("%s?notice=%s", path, notice) }
