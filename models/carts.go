package models

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// MaxLineQuantity is the most units of one product a cart line or order line may hold: enough
// for any shopper, small enough that one order (or one shopper with a card that is always
// declined, until the order expires) cannot take a product's whole demo stock.
const MaxLineQuantity = 10

// CartStore keeps each browser session's cart.
type CartStore struct{ db *gorm.DB }

// NewCartStore returns a CartStore on db.
func NewCartStore(db *gorm.DB) *CartStore { return &CartStore{db: db} }

// Current returns the session's open cart in the tenant's shop with its lines and products,
// or an empty, unsaved cart if the session has none yet. Viewing never creates a cart.
func (s *CartStore) Current(ctx context.Context, tenantID, sessionID string) (*Cart, error) {
	var c Cart
	err := withLines(s.db.WithContext(ctx)).
		Where("tenant_id = ? AND session_id = ? AND status = ?", tenantID, sessionID, CartOpen).
		Take(&c).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return &Cart{TenantID: tenantID, SessionID: sessionID, Status: CartOpen}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load cart: %w", err)
	}
	return &c, nil
}

// Add puts quantity units of the product with sku into the session's cart, creating the cart
// if needed. It returns an invalid_request error for a quantity outside 1–99 (also after
// adding to what is already there), an unknown_product error, or ErrOutOfStock when the cart
// would hold more than the shop has.
func (s *CartStore) Add(ctx context.Context, tenantID, sessionID, sku string, quantity int) error {
	if err := validQuantity(quantity); err != nil {
		return err
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		product, err := productBySKU(tx, tenantID, sku)
		if err != nil {
			return err
		}
		cartID, err := openCart(tx, tenantID, sessionID)
		if err != nil {
			return err
		}
		var existing CartLine
		err = tx.Where("cart_id = ? AND product_id = ?", cartID, product.ID).Take(&existing).Error
		if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
			return fmt.Errorf("read cart line: %w", err)
		}
		total := existing.Quantity + quantity
		if total > MaxLineQuantity {
			return Invalid(fmt.Sprintf("at most %d of one product per order", MaxLineQuantity),
				map[string]string{"quantity": fmt.Sprintf("at most %d", MaxLineQuantity)})
		}
		if total > product.Stock {
			return outOfStock(product.SKU, product.Stock)
		}
		line := CartLine{CartID: cartID, ProductID: product.ID, Quantity: total}
		err = tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "cart_id"}, {Name: "product_id"}},
			DoUpdates: clause.AssignmentColumns([]string{"quantity"}),
		}).Omit("Product").Create(&line).Error
		if err != nil {
			return fmt.Errorf("save cart line: %w", err)
		}
		return touchCart(tx, cartID)
	})
}

// SetQuantity changes the quantity of a product already in the session's cart; 0 removes it.
func (s *CartStore) SetQuantity(ctx context.Context, tenantID, sessionID, sku string, quantity int) error {
	if quantity == 0 {
		return s.Remove(ctx, tenantID, sessionID, sku)
	}
	if err := validQuantity(quantity); err != nil {
		return err
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		product, err := productBySKU(tx, tenantID, sku)
		if err != nil {
			return err
		}
		if quantity > product.Stock {
			return outOfStock(product.SKU, product.Stock)
		}
		res := tx.Model(&CartLine{}).
			Where("product_id = ? AND cart_id IN (?)", product.ID, openCartIDs(tx, tenantID, sessionID)).
			Update("quantity", quantity)
		if res.Error != nil {
			return fmt.Errorf("update cart line: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return ErrNotInCart.Msgf("%s is not in your cart", product.Name)
		}
		return nil
	})
}

// Remove takes the product with sku out of the session's cart. Removing what is not there is
// not an error: the cart ends up as the customer wanted.
func (s *CartStore) Remove(ctx context.Context, tenantID, sessionID, sku string) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		product, err := productBySKU(tx, tenantID, sku)
		if err != nil {
			return err
		}
		err = tx.Where("product_id = ? AND cart_id IN (?)", product.ID, openCartIDs(tx, tenantID, sessionID)).
			Delete(&CartLine{}).Error
		if err != nil {
			return fmt.Errorf("remove cart line: %w", err)
		}
		return nil
	})
}

// openCart returns the id of the session's open cart, creating it if there is none. Two
// concurrent calls cannot create two carts: the partial unique index allows one open cart per
// session, and the loser's insert does nothing.
func openCart(tx *gorm.DB, tenantID, sessionID string) (string, error) {
	c := Cart{ID: NewID("cart"), TenantID: tenantID, SessionID: sessionID, Status: CartOpen}
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Omit("Lines").Create(&c).Error; err != nil {
		return "", fmt.Errorf("create cart: %w", err)
	}
	var id string
	err := tx.Model(&Cart{}).Where("tenant_id = ? AND session_id = ? AND status = ?", tenantID, sessionID, CartOpen).
		Pluck("id", &id).Error
	if err != nil || id == "" {
		return "", fmt.Errorf("find open cart: %w", errors.Join(err, ErrNotFound))
	}
	return id, nil
}

func openCartIDs(tx *gorm.DB, tenantID, sessionID string) *gorm.DB {
	return tx.Model(&Cart{}).Select("id").Where("tenant_id = ? AND session_id = ? AND status = ?", tenantID, sessionID, CartOpen)
}

func touchCart(tx *gorm.DB, cartID string) error {
	if err := tx.Model(&Cart{}).Where("id = ?", cartID).Update("updated_at", tx.NowFunc()).Error; err != nil {
		return fmt.Errorf("touch cart: %w", err)
	}
	return nil
}

func productBySKU(tx *gorm.DB, tenantID, sku string) (*Product, error) {
	sku = strings.TrimSpace(sku)
	var p Product
	err := tx.Where("tenant_id = ? AND sku = ?", tenantID, sku).Take(&p).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, unknownProduct(sku)
	}
	if err != nil {
		return nil, fmt.Errorf("get product: %w", err)
	}
	return &p, nil
}

func validQuantity(q int) error {
	if q < 1 || q > MaxLineQuantity {
		return Invalid(fmt.Sprintf("quantity must be between 1 and %d", MaxLineQuantity),
			map[string]string{"quantity": fmt.Sprintf("must be between 1 and %d", MaxLineQuantity)})
	}
	return nil
}

func outOfStock(sku string, available int) *Error {
	return ErrOutOfStock.Msgf("only %d of %s left in stock", available, sku).
		WithFields(map[string]string{"sku": sku, "available": fmt.Sprint(available)})
}

// ByID returns one of the session's carts, open or converted, with its lines and products, or
// ErrNotFound (also for another session's cart). A converted cart keeps its lines: they are
// what the order was placed from, and a retried checkout must see the same items.
func (s *CartStore) ByID(ctx context.Context, tenantID, sessionID, cartID string) (*Cart, error) {
	var c Cart
	err := withLines(s.db.WithContext(ctx)).
		Where("id = ? AND tenant_id = ? AND session_id = ?", cartID, tenantID, sessionID).
		Take(&c).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load cart: %w", err)
	}
	return &c, nil
}

// withLines loads a cart's lines, in the order they were added, with their products.
func withLines(q *gorm.DB) *gorm.DB {
	return q.Preload("Lines", func(db *gorm.DB) *gorm.DB { return db.Order("cart_lines.created_at, cart_lines.product_id") }).
		Preload("Lines.Product")
}
