package models

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// ProductStore reads a tenant's catalogue.
type ProductStore struct{ db *gorm.DB }

// NewProductStore returns a ProductStore on db.
func NewProductStore(db *gorm.DB) *ProductStore { return &ProductStore{db: db} }

// List returns the tenant's products ordered by name.
func (s *ProductStore) List(ctx context.Context, tenantID string) ([]Product, error) {
	var ps []Product
	if err := s.db.WithContext(ctx).Where("tenant_id = ?", tenantID).Order("name, id").Find(&ps).Error; err != nil {
		return nil, fmt.Errorf("list products: %w", err)
	}
	return ps, nil
}

// BySKU returns one product of the tenant, or an ErrNotFound-kind error naming the SKU.
func (s *ProductStore) BySKU(ctx context.Context, tenantID, sku string) (*Product, error) {
	var p Product
	err := s.db.WithContext(ctx).Where("tenant_id = ? AND sku = ?", tenantID, sku).Take(&p).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, unknownProduct(sku)
	}
	if err != nil {
		return nil, fmt.Errorf("get product: %w", err)
	}
	return &p, nil
}

func unknownProduct(sku string) *Error {
	return ErrUnknownProduct.Msgf("no product with SKU %q", sku).WithFields(map[string]string{"sku": sku})
}
