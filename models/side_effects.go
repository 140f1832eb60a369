package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// WebhookEvent is a gateway event the shop has processed.
type WebhookEvent struct {
	EventID    string `gorm:"primaryKey"`
	Type       string
	ChargeID   string
	PaymentID  *string
	Decision   string
	ReceivedAt time.Time

	// PayloadHash is the SHA-256 of the event as processed, to tell a redelivery from a
	// changed payload under the same id (see MarkWebhookConflictTx).
	PayloadHash *string
}

// Webhook processing decisions.
const (
	DecisionApplied        = "applied"
	DecisionNoChange       = "no_change"
	DecisionUnknownPayment = "unknown_payment"
)

// RecordWebhookEventTx records that an event was processed, inside the transaction that applies
// it. It reports false when the event id was already recorded: a redelivery, to be answered 2xx
// with no effect. Because the record and the state change commit together, a crash between
// them cannot lose the change or apply it twice.
func RecordWebhookEventTx(tx *gorm.DB, ev *WebhookEvent) (bool, error) {
	ev.ReceivedAt = tx.NowFunc()
	res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(ev)
	if res.Error != nil {
		return false, fmt.Errorf("record webhook event %s: %w", ev.EventID, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// SetWebhookDecisionTx stores what processing an event decided.
func SetWebhookDecisionTx(tx *gorm.DB, eventID, decision string, paymentID string) error {
	set := map[string]any{"decision": decision}
	if paymentID != "" {
		set["payment_id"] = paymentID
	}
	if err := tx.Model(&WebhookEvent{}).Where("event_id = ?", eventID).Updates(set).Error; err != nil {
		return fmt.Errorf("record webhook decision: %w", err)
	}
	return nil
}

// MailboxMessage is an e-mail the shop sent, delivered to the local mailbox shown at /mailbox.
type MailboxMessage struct {
	ID        int64 `gorm:"primaryKey"`
	TenantID  string
	OrderID   string
	Kind      string
	ToAddress string
	Subject   string
	Body      string
	DedupeKey *string
	CreatedAt time.Time
}

// Shipment is a request to the (simulated) warehouse to ship an order.
type Shipment struct {
	ID        int64 `gorm:"primaryKey"`
	TenantID  string
	OrderID   string
	Status    string
	DedupeKey *string
	CreatedAt time.Time
}

// SideEffectStore delivers and lists receipts and shipments.
type SideEffectStore struct{ db *gorm.DB }

// NewSideEffectStore returns a SideEffectStore on db.
func NewSideEffectStore(db *gorm.DB) *SideEffectStore { return &SideEffectStore{db: db} }

// DeliverReceipt puts a receipt for the order in the mailbox. With a dedupe key, delivering the
// same receipt again is a no-op (ON CONFLICT DO NOTHING): the receiving side of the outbox is
// idempotent, so at-least-once delivery of the job becomes exactly one message. It reports
// whether a message was written.
func (s *SideEffectStore) DeliverReceipt(ctx context.Context, m *MailboxMessage) (bool, error) {
	m.Kind = "receipt"
	res := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(m)
	if res.Error != nil {
		return false, fmt.Errorf("deliver receipt: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// RequestShipment records a shipment request for the order, deduplicated like DeliverReceipt.
func (s *SideEffectStore) RequestShipment(ctx context.Context, sh *Shipment) (bool, error) {
	sh.Status = "requested"
	res := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(sh)
	if res.Error != nil {
		return false, fmt.Errorf("request shipment: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// Mailbox returns the tenant's latest messages, newest first ("" lists every tenant's).
func (s *SideEffectStore) Mailbox(ctx context.Context, tenantID string, limit int) ([]MailboxMessage, error) {
	q := s.db.WithContext(ctx).Order("created_at DESC, id DESC").Limit(limit)
	if tenantID != "" {
		q = q.Where("tenant_id = ?", tenantID)
	}
	var ms []MailboxMessage
	if err := q.Find(&ms).Error; err != nil {
		return nil, fmt.Errorf("list mailbox: %w", err)
	}
	return ms, nil
}

// CountByOrder returns, for the given orders, how many receipts and shipments each has.
func (s *SideEffectStore) CountByOrder(ctx context.Context, orderIDs []string) (receipts, shipments map[string]int, err error) {
	receipts, shipments = map[string]int{}, map[string]int{}
	if len(orderIDs) == 0 {
		return receipts, shipments, nil
	}
	type row struct {
		OrderID string
		N       int
	}
	var rs []row
	if err := s.db.WithContext(ctx).Model(&MailboxMessage{}).Select("order_id, count(*) AS n").
		Where("order_id IN ?", orderIDs).Group("order_id").Scan(&rs).Error; err != nil {
		return nil, nil, fmt.Errorf("count receipts: %w", err)
	}
	for _, r := range rs {
		receipts[r.OrderID] = r.N
	}
	rs = nil
	if err := s.db.WithContext(ctx).Model(&Shipment{}).Select("order_id, count(*) AS n").
		Where("order_id IN ?", orderIDs).Group("order_id").Scan(&rs).Error; err != nil {
		return nil, nil, fmt.Errorf("count shipments: %w", err)
	}
	for _, r := range rs {
		shipments[r.OrderID] = r.N
	}
	return receipts, shipments, nil
}
