package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Triage actions: what an operator may do about a reconciliation finding.
const (
	ActionCheckNow          = "check_now"
	ActionRefundExtraCharge = "refund_extra_charge"
	ActionSettleStuck       = "settle_stuck"
	ActionDismissDuplicate  = "dismiss_duplicate"
)

// Actions lists the triage actions in the order the desk offers them.
var Actions = []string{ActionCheckNow, ActionRefundExtraCharge, ActionSettleStuck, ActionDismissDuplicate}

// JournalDecision is the journal kind of a triage decision: an operator's (or an API
// client's) action on a reconciliation finding, with what it came to.
const JournalDecision = "decision"

// ResultDismissed is the result of a dismiss_duplicate decision: the order is a real purchase
// of its own, and reconciliation stops suspecting it.
const ResultDismissed = "dismissed"

// MaxReasonLength is the longest reason a decision keeps, in characters.
const MaxReasonLength = 500

// Decision is one decision taken on the triage desk. It is appended, never changed: who took
// it (an operator's browser session or an API key, never the credential itself), about which
// order and findings, what the gateway showed at that moment, the action, what it came to,
// and the reason the person typed.
type Decision struct {
	ID        string `gorm:"primaryKey"`
	TenantID  string
	OrderID   string
	Action    string
	Findings  string // the report's lists that named the order, comma-separated
	Who       string
	Gateway   string // what the gateway showed, in words
	Result    string
	Detail    string
	Reason    string
	CreatedAt time.Time
}

// TableName tells GORM the table's name.
func (Decision) TableName() string { return "triage_decisions" }

// RecordDecisionTx appends d inside tx, the transaction of the action's own write (and of its
// journal line), so a decision is recorded exactly when what it did is.
func RecordDecisionTx(tx *gorm.DB, d *Decision) error {
	if d.ID == "" {
		d.ID = NewID("dec")
	}
	if d.CreatedAt.IsZero() {
		d.CreatedAt = now()
	}
	if err := tx.Create(d).Error; err != nil {
		return fmt.Errorf("record decision: %w", err)
	}
	return nil
}

// DecisionStore reads the triage desk's decisions.
type DecisionStore struct{ db *gorm.DB }

// NewDecisionStore returns a DecisionStore on db.
func NewDecisionStore(db *gorm.DB) *DecisionStore { return &DecisionStore{db: db} }

// List returns the tenant's latest decisions, newest first, at most limit.
func (s *DecisionStore) List(ctx context.Context, tenantID string, limit int) ([]Decision, error) {
	var ds []Decision
	err := s.db.WithContext(ctx).Where("tenant_id = ?", tenantID).
		Order("created_at DESC, id DESC").Limit(limit).Find(&ds).Error
	if err != nil {
		return nil, fmt.Errorf("list decisions: %w", err)
	}
	return ds, nil
}

// Dismissed returns the tenant's orders that an operator dismissed as real purchases of their
// own (dismiss_duplicate), so reconciliation no longer lists them as suspected duplicates.
func (s *DecisionStore) Dismissed(ctx context.Context, tenantID string) (map[string]bool, error) {
	var ids []string
	err := s.db.WithContext(ctx).Model(&Decision{}).
		Where("tenant_id = ? AND action = ? AND result = ?", tenantID, ActionDismissDuplicate, ResultDismissed).
		Distinct().Pluck("order_id", &ids).Error
	if err != nil {
		return nil, fmt.Errorf("dismissed orders: %w", err)
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}
