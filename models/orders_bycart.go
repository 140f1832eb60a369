package models

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// ByCart returns the order that the tenant's cart became, with its lines and payments, or an
// ErrNotFound-kind error if the cart has not been converted. The storefront uses it to answer
// a double submit of the checkout form with the order the first submit created: a cart turns
// into at most one order (orders.cart_id is UNIQUE), so this is the one.
func (s *OrderStore) ByCart(ctx context.Context, tenantID, cartID string) (*Order, error) {
	var o Order
	err := s.db.WithContext(ctx).
		Preload("Lines", func(db *gorm.DB) *gorm.DB { return db.Order("line_no") }).
		Preload("Payments", func(db *gorm.DB) *gorm.DB { return db.Order("created_at, id") }).
		Where("tenant_id = ? AND cart_id = ?", tenantID, cartID).Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, Errorf(KindNotFound, ErrNotFound.Code, "no order from cart %q", cartID)
	}
	if err != nil {
		return nil, fmt.Errorf("get order by cart: %w", err)
	}
	return &o, nil
}
