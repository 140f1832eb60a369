package models

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// TenantStore reads tenants.
type TenantStore struct{ db *gorm.DB }

// NewTenantStore returns a TenantStore on db.
func NewTenantStore(db *gorm.DB) *TenantStore { return &TenantStore{db: db} }

// ByAPIKey returns the tenant whose API key is key, or ErrUnauthorized.
func (s *TenantStore) ByAPIKey(ctx context.Context, key string) (*Tenant, error) {
	if key == "" {
		return nil, ErrUnauthorized
	}
	var t Tenant
	err := s.db.WithContext(ctx).Where("api_key_hash = ?", HashAPIKey(key)).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrUnauthorized
	}
	if err != nil {
		return nil, fmt.Errorf("find tenant by api key: %w", err)
	}
	return &t, nil
}

// Get returns the tenant with id, or ErrNotFound.
func (s *TenantStore) Get(ctx context.Context, id string) (*Tenant, error) {
	var t Tenant
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound.Msgf("no shop named %q", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get tenant: %w", err)
	}
	return &t, nil
}

// List returns every tenant, ordered by id.
func (s *TenantStore) List(ctx context.Context) ([]Tenant, error) {
	var ts []Tenant
	if err := s.db.WithContext(ctx).Order("id").Find(&ts).Error; err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	return ts, nil
}
