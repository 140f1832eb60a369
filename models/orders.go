package models

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Item is one requested line of an order: a SKU of the tenant's catalogue and a quantity.
type Item struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// Address is where an order ships. Country is an ISO 3166 alpha-2 code.
type Address struct {
	Name       string `json:"name"`
	Address    string `json:"address"`
	City       string `json:"city"`
	PostalCode string `json:"postal_code"`
	Country    string `json:"country"`
}

// NewOrder is everything needed to place an order. TenantID comes from the credential or the
// storefront, never from a request body. CartID is set when the order comes from a browser cart.
type NewOrder struct {
	TenantID       string
	CartID         string
	SessionID      string
	Email          string
	Shipping       Address
	ShippingMethod string
	Items          []Item
}

// Normalize trims white space and upper-cases the country, so that validation and the
// idempotency fingerprint see one spelling of the same request.
func (n *NewOrder) Normalize() {
	n.Email = strings.TrimSpace(n.Email)
	n.Shipping.Name = strings.TrimSpace(n.Shipping.Name)
	n.Shipping.Address = strings.TrimSpace(n.Shipping.Address)
	n.Shipping.City = strings.TrimSpace(n.Shipping.City)
	n.Shipping.PostalCode = strings.TrimSpace(n.Shipping.PostalCode)
	n.Shipping.Country = strings.ToUpper(strings.TrimSpace(n.Shipping.Country))
	n.ShippingMethod = strings.TrimSpace(n.ShippingMethod)
	if n.ShippingMethod == "" {
		n.ShippingMethod = ShippingStandard
	}
	for i := range n.Items {
		n.Items[i].SKU = strings.TrimSpace(n.Items[i].SKU)
	}
}

// Validate checks the order's shape (not the catalogue) and returns an invalid_request error
// whose Fields name each problem, keyed by the form field name.
func (n *NewOrder) Validate() error {
	fields := map[string]string{}
	if n.Email == "" {
		fields["email"] = "Enter your e-mail address."
	} else if a, err := mail.ParseAddress(n.Email); err != nil || a.Address != n.Email || len(n.Email) > 254 {
		fields["email"] = "Enter a valid e-mail address, like name@example.com."
	}
	required := map[string]string{
		"name": n.Shipping.Name, "address": n.Shipping.Address,
		"city": n.Shipping.City, "postal_code": n.Shipping.PostalCode,
	}
	for field, v := range required {
		if v == "" {
			fields[field] = "This field is required."
		} else if len(v) > 200 {
			fields[field] = "At most 200 characters."
		}
	}
	if !isAlpha2(n.Shipping.Country) {
		fields["country"] = "Choose a country (two-letter code such as US or DE)."
	}
	if n.ShippingMethod != ShippingStandard && n.ShippingMethod != ShippingExpress {
		fields["shipping_method"] = "Choose standard or express shipping."
	}
	if len(n.Items) == 0 {
		fields["items"] = "The order has no items."
	} else if len(n.Items) > 50 {
		fields["items"] = "At most 50 different products per order."
	}
	seen := map[string]bool{}
	for i, it := range n.Items {
		key := fmt.Sprintf("items[%d]", i)
		switch {
		case it.SKU == "":
			fields[key] = "Each item needs a sku."
		case it.Quantity < 1 || it.Quantity > MaxLineQuantity:
			fields[key] = fmt.Sprintf("Quantity must be between 1 and %d.", MaxLineQuantity)
		case seen[it.SKU]:
			fields[key] = fmt.Sprintf("SKU %s appears twice; send one line with the total quantity.", it.SKU)
		}
		seen[it.SKU] = true
	}
	if len(fields) > 0 {
		return Invalid("The order is not valid.", fields)
	}
	return nil
}

func isAlpha2(s string) bool {
	return len(s) == 2 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z'
}

// OrderExpired is the status of an order that was not paid in time (see ExpireUnpaidOrders):
// its stock is back on sale and it can no longer be paid. An order reaches it from
// pending_payment or payment_failed, never from paid, and never leaves it.
const OrderExpired = "expired"

// OrderStore places and reads orders.
type OrderStore struct{ db *gorm.DB }

// NewOrderStore returns an OrderStore on db.
func NewOrderStore(db *gorm.DB) *OrderStore { return &OrderStore{db: db} }

// Create places an order in one transaction. See CreateOrderTx for what it checks.
func (s *OrderStore) Create(ctx context.Context, in NewOrder) (*Order, error) {
	var order *Order
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		order, err = CreateOrderTx(tx, in)
		return err
	})
	return order, err
}

// CreateAndFinish places an order like Create and then calls finish inside the same
// transaction, with the new order. The idempotency layer completes its key there, so the order
// rows and the stored answer commit together or not at all. An error from finish rolls back
// everything, the order and its stock reservation included.
func (s *OrderStore) CreateAndFinish(ctx context.Context, in NewOrder, finish func(tx *gorm.DB, o *Order) error) (*Order, error) {
	var order *Order
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if order, err = CreateOrderTx(tx, in); err != nil {
			return err
		}
		return finish(tx, order)
	})
	if err != nil {
		return nil, err
	}
	return order, nil
}

// CreateOrderTx places an order inside the caller's transaction, so that an idempotency key or
// a recovery point can commit together with it. It validates in, prices every line from the
// tenant's catalogue (a snapshot), reserves stock with a conditional decrement, inserts the
// order and its lines with status pending_payment, and converts the cart if there is one.
//
// Errors: invalid_request (shape), unknown_product (a SKU not in the catalogue),
// ErrOutOfStock (naming the SKU), ErrCartConverted.
func CreateOrderTx(tx *gorm.DB, in NewOrder) (*Order, error) {
	in.Normalize()
	if err := in.Validate(); err != nil {
		return nil, err
	}
	skus := make([]string, len(in.Items))
	for i, it := range in.Items {
		skus[i] = it.SKU
	}
	var products []Product
	if err := tx.Where("tenant_id = ? AND sku IN ?", in.TenantID, skus).Find(&products).Error; err != nil {
		return nil, fmt.Errorf("load products: %w", err)
	}
	bySKU := make(map[string]Product, len(products))
	for _, p := range products {
		bySKU[p.SKU] = p
	}
	order := &Order{
		ID: NewID("ord"), TenantID: in.TenantID, Email: in.Email,
		ShippingName: in.Shipping.Name, ShippingAddress: in.Shipping.Address,
		ShippingCity: in.Shipping.City, ShippingPostalCode: in.Shipping.PostalCode,
		ShippingCountry: in.Shipping.Country, ShippingMethod: in.ShippingMethod,
		ShippingAmount: ShippingCost(in.ShippingMethod), Status: OrderPendingPayment,
	}
	if in.CartID != "" {
		order.CartID = &in.CartID
	}
	if in.SessionID != "" {
		order.SessionID = &in.SessionID
	}
	for i, it := range in.Items {
		p, ok := bySKU[it.SKU]
		if !ok {
			return nil, unknownProduct(it.SKU)
		}
		if order.Currency == "" {
			order.Currency = p.Currency
		} else if order.Currency != p.Currency {
			return nil, Invalid("All items of an order must be priced in one currency.", map[string]string{"items": "mixed currencies"})
		}
		line := OrderLine{OrderID: order.ID, LineNo: i + 1, ProductID: p.ID, SKU: p.SKU, Name: p.Name,
			UnitAmount: p.Amount, Quantity: it.Quantity, Amount: p.Amount * int64(it.Quantity)}
		order.Lines = append(order.Lines, line)
		order.SubtotalAmount += line.Amount
	}
	order.Amount = order.SubtotalAmount + order.ShippingAmount

	if err := reserveStock(tx, order.Lines); err != nil {
		return nil, err
	}
	if in.CartID != "" {
		res := tx.Model(&Cart{}).Where("id = ? AND tenant_id = ? AND status = ?", in.CartID, in.TenantID, CartOpen).
			Updates(map[string]any{"status": CartConverted, "updated_at": tx.NowFunc()})
		if res.Error != nil {
			return nil, fmt.Errorf("convert cart: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return nil, ErrCartConverted
		}
	}
	if err := tx.Omit("Lines", "Payments").Create(order).Error; err != nil {
		if isUniqueViolation(err) && in.CartID != "" {
			return nil, ErrCartConverted
		}
		return nil, fmt.Errorf("insert order: %w", err)
	}
	if err := tx.Create(&order.Lines).Error; err != nil {
		return nil, fmt.Errorf("insert order lines: %w", err)
	}
	return order, nil
}

// reserveStock takes each line's quantity out of stock with a conditional decrement
// ("… WHERE stock >= quantity"), so two orders racing for the last unit cannot both win, on
// either database, without reading stock first. It is one statement per line, on purpose:
// orders have a handful of lines, and a failed line tells us exactly which SKU ran out. Lines
// are taken in product id order so two concurrent orders lock rows in the same order and
// cannot deadlock.
func reserveStock(tx *gorm.DB, lines []OrderLine) error {
	sorted := append([]OrderLine(nil), lines...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ProductID < sorted[j].ProductID })
	for _, l := range sorted {
		res := tx.Model(&Product{}).Where("id = ? AND stock >= ?", l.ProductID, l.Quantity).
			Update("stock", gorm.Expr("stock - ?", l.Quantity))
		if res.Error != nil {
			return fmt.Errorf("reserve stock for %s: %w", l.SKU, res.Error)
		}
		if res.RowsAffected == 0 {
			var available int
			if err := tx.Model(&Product{}).Where("id = ?", l.ProductID).Pluck("stock", &available).Error; err != nil {
				return fmt.Errorf("read stock for %s: %w", l.SKU, err)
			}
			return outOfStock(l.SKU, available)
		}
	}
	return nil
}

// Get returns the tenant's order with its lines and payments, or ErrNotFound (also for an order
// of another tenant: it must look as if it did not exist).
func (s *OrderStore) Get(ctx context.Context, tenantID, id string) (*Order, error) {
	return getOrder(s.db.WithContext(ctx).Where("tenant_id = ?", tenantID), id)
}

// GetAnyTenant returns an order by its unguessable id alone. The storefront uses it for the
// confirmation page, whose URL is the order's capability.
func (s *OrderStore) GetAnyTenant(ctx context.Context, id string) (*Order, error) {
	return getOrder(s.db.WithContext(ctx), id)
}

func getOrder(q *gorm.DB, id string) (*Order, error) {
	var o Order
	err := q.Preload("Lines", func(db *gorm.DB) *gorm.DB { return db.Order("line_no") }).
		Preload("Payments", func(db *gorm.DB) *gorm.DB { return db.Order("created_at, id") }).
		Where("id = ?", id).Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, Errorf(KindNotFound, ErrNotFound.Code, "no order %q", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get order: %w", err)
	}
	return &o, nil
}

// ListSince returns the tenant's orders created strictly after after (all of them if after is
// zero), oldest first, at most limit, with their lines and payments (oldest first) loaded in
// one query each. Orders created at the same instant come in id order. Timestamps compare at
// the database's precision: microseconds on PostgreSQL, nanoseconds on SQLite.
func (s *OrderStore) ListSince(ctx context.Context, tenantID string, after time.Time, limit int) ([]Order, error) {
	q := s.db.WithContext(ctx).Where("tenant_id = ?", tenantID)
	if !after.IsZero() {
		// Stored times are UTC; SQLite compares them as text, so the bound must be UTC too.
		q = q.Where("created_at > ?", after.UTC())
	}
	var os []Order
	err := q.Preload("Lines", func(db *gorm.DB) *gorm.DB { return db.Order("line_no") }).
		Preload("Payments", func(db *gorm.DB) *gorm.DB { return db.Order("created_at, id") }).
		Order("created_at, id").Limit(limit).Find(&os).Error
	if err != nil {
		return nil, fmt.Errorf("list orders since: %w", err)
	}
	return os, nil
}

// ListForSession returns the browser session's orders in the tenant's shop, newest first.
func (s *OrderStore) ListForSession(ctx context.Context, tenantID, sessionID string) ([]Order, error) {
	var os []Order
	err := s.db.WithContext(ctx).Preload("Lines", func(db *gorm.DB) *gorm.DB { return db.Order("line_no") }).
		Where("tenant_id = ? AND session_id = ?", tenantID, sessionID).
		Order("created_at DESC, id").Limit(100).Find(&os).Error
	if err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	return os, nil
}

// ExpiredOrder is an order ExpireUnpaidOrders expired, with the units it gave back to stock.
type ExpiredOrder struct {
	ID       string
	TenantID string
	Units    int
}

// ExpireUnpaidOrders expires up to limit orders that nobody is paying for, oldest first, and
// gives their stock back, in one transaction; finish, if set, runs inside it with the orders
// it expired (the expiry job journals them there). It returns the orders expired.
//
// An order is expired when it is pending_payment or payment_failed, has had no attempt since
// cutoff — neither placed nor given a payment (updated_at) nor seen a payment settle — and has
// no payment pending (its outcome is not known: it may yet be paid) or succeeded (money was
// taken: reconciliation must look at it, and the stock stays).
//
// It cannot race a payment: CreatePaymentTx first moves the order's updated_at to now with
// a conditional update on the same row. On PostgreSQL whichever statement comes second waits
// for the other's row lock and then re-reads the row — the expiry finds a fresh updated_at and
// leaves the order, or the payment finds the order expired and answers ErrOrderExpired; SQLite
// runs one writer at a time. The status update is conditional too, so stock comes back once.
func (s *OrderStore) ExpireUnpaidOrders(ctx context.Context, cutoff time.Time, limit int, finish func(tx *gorm.DB, expired []ExpiredOrder) error) ([]ExpiredOrder, error) {
	var expired []ExpiredOrder
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		cutoff := cutoff.UTC() // SQLite compares stored (UTC) times as text
		var rows []struct{ ID, TenantID string }
		err := tx.Raw(`UPDATE orders SET status = ?, updated_at = ?
			WHERE id IN (
				SELECT o.id FROM orders o
				WHERE o.status IN ? AND o.updated_at < ?
				  AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.id
				                  AND (p.status IN ? OR p.updated_at >= ?))
				ORDER BY o.updated_at, o.id LIMIT ?)
			  AND status IN ? AND updated_at < ?
			RETURNING id, tenant_id`,
			OrderExpired, tx.NowFunc(),
			orderPredecessors[OrderExpired], cutoff, []string{PaymentPending, PaymentSucceeded}, cutoff, limit,
			orderPredecessors[OrderExpired], cutoff).Scan(&rows).Error
		if err != nil {
			return fmt.Errorf("expire orders: %w", err)
		}
		if len(rows) == 0 {
			return nil
		}
		ids := make([]string, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		// Stock comes back once per order, whoever gives it back: an operator may already have
		// released it (the triage desk's settle as failed, ReleaseStockTx). The same
		// conditional mark as there picks the orders whose stock is still out.
		var release []string
		if err := tx.Raw(`UPDATE orders SET stock_released_at = ? WHERE id IN ? AND stock_released_at IS NULL RETURNING id`,
			tx.NowFunc(), ids).Scan(&release).Error; err != nil {
			return fmt.Errorf("mark stock of expired orders released: %w", err)
		}
		var lines []OrderLine
		if err := tx.Where("order_id IN ?", release).Find(&lines).Error; err != nil {
			return fmt.Errorf("load lines of expired orders: %w", err)
		}
		units := map[string]int{}
		back := map[int64]int{} // product id → units back in stock
		for _, l := range lines {
			units[l.OrderID] += l.Quantity
			back[l.ProductID] += l.Quantity
		}
		if err := releaseStock(tx, back); err != nil {
			return err
		}
		for _, r := range rows {
			expired = append(expired, ExpiredOrder{ID: r.ID, TenantID: r.TenantID, Units: units[r.ID]})
		}
		sort.Slice(expired, func(i, j int) bool { return expired[i].ID < expired[j].ID })
		if finish != nil {
			return finish(tx, expired)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return expired, nil
}

// releaseStock puts units back, one statement per product in product id order: the order
// reserveStock takes rows in, so an expiry and a checkout never wait for each other in a
// circle. An expiry pass touches a catalogue's worth of products at most.
func releaseStock(tx *gorm.DB, back map[int64]int) error {
	ids := make([]int64, 0, len(back))
	for id := range back {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if err := tx.Model(&Product{}).Where("id = ?", id).Update("stock", gorm.Expr("stock + ?", back[id])).Error; err != nil {
			return fmt.Errorf("give stock back to product %d: %w", id, err)
		}
	}
	return nil
}
