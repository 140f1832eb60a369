package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// ClaimedKey is an abandoned operation that a completer now owns.
type ClaimedKey struct {
	Key      *IdempotencyKey
	TenantID string
	Endpoint string
}

// ClaimAbandoned takes over up to limit operations of the given endpoints that nobody is
// working on: still in progress, with no sign of life for a whole lease (the owner crashed,
// or released the key after an infrastructure failure and its client never came back). Each
// takeover is the same compare-and-set as Reserve's, so a completer and a client retry — or
// two completers on two shop replicas — never both own a key. Keys it loses a race for are
// simply not returned.
func (s *IdempotencyStore) ClaimAbandoned(ctx context.Context, endpoints []string, lease time.Duration, limit int, skipTenants []string) ([]ClaimedKey, error) {
	db := s.db.WithContext(ctx)
	t := now()
	cutoff := t.Add(-lease)
	abandoned := func(q *gorm.DB) *gorm.DB {
		return q.Where("state = ? AND endpoint IN ? AND updated_at < ? AND (lock_token IS NULL OR locked_at < ?)",
			KeyInProgress, endpoints, cutoff, cutoff)
	}
	find := abandoned(db.Model(&IdempotencyRecord{}))
	if len(skipTenants) > 0 {
		find = find.Where("tenant_id NOT IN ?", skipTenants)
	}
	var candidates []IdempotencyRecord
	if err := find.Order("updated_at").Limit(limit).Find(&candidates).Error; err != nil {
		return nil, fmt.Errorf("find abandoned idempotency keys: %w", err)
	}
	var claimed []ClaimedKey
	for _, r := range candidates {
		token := NewID("lease")
		res := abandoned(db.Model(&IdempotencyRecord{})).Where("id = ?", r.ID).
			Updates(map[string]any{"lock_token": token, "locked_at": t, "updated_at": t, "attempts": gorm.Expr("attempts + 1")})
		if res.Error != nil {
			return claimed, fmt.Errorf("claim idempotency key: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			continue // a retry or another completer got there first
		}
		r.LockToken, r.LockedAt, r.UpdatedAt = &token, &t, t
		r.Attempts++
		claimed = append(claimed, ClaimedKey{Key: newKeyHandle(s, &r, lease), TenantID: r.TenantID, Endpoint: r.Endpoint})
	}
	return claimed, nil
}
