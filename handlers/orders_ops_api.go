package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
)

// OpsOrders is what the ops views need from the order store. *models.OrderStore is one.
type OpsOrders interface {
	Get(ctx context.Context, tenantID, id string) (*models.Order, error)
	ListSince(ctx context.Context, tenantID string, after time.Time, limit int) ([]models.Order, error)
}

// SideEffectCounter counts the receipts and shipments of orders. *models.SideEffectStore is one.
type SideEffectCounter interface {
	CountByOrder(ctx context.Context, orderIDs []string) (receipts, shipments map[string]int, err error)
}

// OrdersOpsAPI serves the read-only ops views of a tenant's orders: GET /api/v1/orders (recent
// orders with every payment and their side effects) and GET /api/v1/orders/:id/events (an
// order's journal). An operator reads them to see what happened; the failure lab judges a
// running shop through them, over HTTP, without access to its database.
type OrdersOpsAPI struct {
	Orders  OpsOrders
	Effects SideEffectCounter
	Journal OrderJournal
}

// Routes mounts the ops views on an authenticated /api/v1 group.
func (h *OrdersOpsAPI) Routes(g *echo.Group) {
	g.GET("/orders", h.list).Name = "api.orders.list"
	g.GET("/orders/:id/events", h.events).Name = "api.orders.events"
}

// Page sizes of GET /api/v1/orders.
const (
	DefaultOrdersLimit = 100
	MaxOrdersLimit     = 500
)

// OrderOpsJSON is an order as the ops list shows it: the order's API view, unchanged, plus
// every payment (oldest first; "payment" stays the latest) and how many receipts and
// shipment requests exist for it. It is a type of its own so that the order JSON stored with
// idempotency keys never changes because of an ops view.
type OrderOpsJSON struct {
	OrderJSON
	Payments  []PaymentJSON `json:"payments"`
	Receipts  int           `json:"receipts"`
	Shipments int           `json:"shipments"`
}

// JournalEventJSON is one event of an order's journal. Empty members are left out; At (and
// LastAt) is RFC 3339 in UTC with nanoseconds, always nine digits, so events sort as text too.
// Repeats counts the later events just like this one that the journal counted here instead
// of writing them (a key's replays, 409s and 422s past the first few), the last at LastAt.
type JournalEventJSON struct {
	At             string `json:"at"`
	Actor          string `json:"actor,omitempty"`
	Kind           string `json:"kind,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	OrderID        string `json:"order_id,omitempty"`
	PaymentID      string `json:"payment_id,omitempty"`
	Detail         string `json:"detail,omitempty"`
	Repeats        int    `json:"repeats,omitempty"`
	LastAt         string `json:"last_at,omitempty"`
}

// journalTime is RFC 3339 with a fixed nine-digit fraction.
const journalTime = "2006-01-02T15:04:05.000000000Z07:00"

// list answers 200 {"data":[OrderOpsJSON…]}: the tenant's orders created strictly after
// created_after (all without it), oldest first, at most limit. A bad created_after or limit is
// 400 invalid_request naming it in "fields". Receipts and shipments are counted in one query
// per kind for the whole page.
func (h *OrdersOpsAPI) list(c echo.Context) error {
	after, limit, err := parseOrdersQuery(c.QueryParams())
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	orders, err := h.Orders.ListSince(ctx, TenantOf(c).ID, after, limit)
	if err != nil {
		return err
	}
	ids := make([]string, len(orders))
	for i, o := range orders {
		ids[i] = o.ID
	}
	receipts, shipments, err := h.Effects.CountByOrder(ctx, ids)
	if err != nil {
		return err
	}
	out := make([]OrderOpsJSON, len(orders))
	for i := range orders {
		o := &orders[i]
		out[i] = OrderOpsJSON{OrderJSON: OrderJSONOf(o), Payments: make([]PaymentJSON, len(o.Payments)),
			Receipts: receipts[o.ID], Shipments: shipments[o.ID]}
		for j := range o.Payments {
			out[i].Payments[j] = *PaymentJSONOf(&o.Payments[j])
		}
	}
	return writeJSON(c, http.StatusOK, map[string]any{"data": out})
}

// parseOrdersQuery reads created_after (RFC 3339, fractional seconds allowed) and limit (1 to
// MaxOrdersLimit, default DefaultOrdersLimit). A parameter that is present must be valid, even
// empty: "created_after=" is more likely a client's unset variable than a wish for every order.
func parseOrdersQuery(q url.Values) (time.Time, int, error) {
	var after time.Time
	limit := DefaultOrdersLimit
	var bad []string // the parameters to name in the message
	fields := map[string]string{}
	if q.Has("created_after") {
		t, err := time.Parse(time.RFC3339Nano, q.Get("created_after"))
		if err != nil {
			bad = append(bad, "created_after")
			fields["created_after"] = "Give an RFC 3339 time such as 2026-03-01T10:00:00.5Z; in a URL, write + as %2B."
		}
		after = t
	}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > MaxOrdersLimit {
			bad = append(bad, "limit")
			fields["limit"] = fmt.Sprintf("Give a whole number from 1 to %d.", MaxOrdersLimit)
		}
		limit = n
	}
	if len(bad) > 0 {
		what := "Invalid query parameter: "
		if len(bad) > 1 {
			what = "Invalid query parameters: "
		}
		return time.Time{}, 0, models.Invalid(what+strings.Join(bad, ", ")+".", fields)
	}
	return after, limit, nil
}

// events answers 200 {"data":[JournalEventJSON…]}: the order's journal, oldest first — the
// events about the order and those of the idempotency keys that worked on it. An unknown
// order, or another tenant's, is 404 not_found: ownership is checked before the journal is read.
func (h *OrdersOpsAPI) events(c echo.Context) error {
	ctx := c.Request().Context()
	o, err := h.Orders.Get(ctx, TenantOf(c).ID, c.Param("id"))
	if err != nil {
		return err
	}
	evs, err := h.Journal.ForOrder(ctx, o.ID)
	if err != nil {
		return err
	}
	out := make([]JournalEventJSON, len(evs))
	for i, ev := range evs {
		out[i] = JournalEventJSON{At: ev.At.UTC().Format(journalTime), Actor: ev.Actor, Kind: ev.Kind,
			IdempotencyKey: ev.IdempotencyKey, OrderID: ev.OrderID, PaymentID: ev.PaymentID, Detail: ev.Detail,
			Repeats: ev.Repeats}
		if ev.LastAt != nil {
			out[i].LastAt = ev.LastAt.UTC().Format(journalTime)
		}
	}
	return writeJSON(c, http.StatusOK, map[string]any{"data": out})
}
