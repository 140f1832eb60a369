package models

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Payment and order statuses only move forward. These are the allowed predecessors of each
// target status; every transition below is one conditional UPDATE ("… WHERE status IN
// (predecessors)"), so a late, duplicate or reordered event can never move a status back, and
// two writers racing for the same transition cannot both win.
//
//	payment: pending → succeeded | failed | refunded;  succeeded → refunded
//	order:   pending_payment → paid | payment_failed | expired;  payment_failed → paid | expired
var (
	paymentPredecessors = map[string][]string{
		PaymentSucceeded: {PaymentPending},
		PaymentFailed:    {PaymentPending},
		PaymentRefunded:  {PaymentPending, PaymentSucceeded},
	}
	orderPredecessors = map[string][]string{
		OrderPaid:          {OrderPendingPayment, OrderPaymentFailed},
		OrderPaymentFailed: {OrderPendingPayment},
		OrderExpired:       {OrderPendingPayment, OrderPaymentFailed},
	}
)

// CanPaymentMove reports whether a payment may move from one status to another.
func CanPaymentMove(from, to string) bool { return slices.Contains(paymentPredecessors[to], from) }

// CanOrderMove reports whether an order may move from one status to another.
func CanOrderMove(from, to string) bool { return slices.Contains(orderPredecessors[to], from) }

// NewPayment describes a payment to record before the gateway is called.
type NewPayment struct {
	TenantID        string
	Order           *Order
	PaymentMethodID string
	CardLast4       string
	CardBrand       string
}

// CreatePaymentTx inserts a pending payment for the order inside the caller's transaction. Its
// gateway key is derived from its own id ("<payment id>:charge"): recorded before the gateway
// is ever called, identical on every attempt and after a restart. It returns
// ErrOrderAlreadyPaid, ErrOrderExpired or ErrPaymentInProgress when the order cannot take a
// new payment; the caller then rolls back.
func CreatePaymentTx(tx *gorm.DB, in NewPayment) (*Payment, error) {
	switch in.Order.Status {
	case OrderPaid:
		return nil, ErrOrderAlreadyPaid
	case OrderExpired:
		return nil, ErrOrderExpired
	}
	id := NewID("pay")
	p := &Payment{
		ID: id, TenantID: in.TenantID, OrderID: in.Order.ID, Status: PaymentPending,
		Amount: in.Order.Amount, Currency: in.Order.Currency, PaymentMethodID: in.PaymentMethodID,
		CardLast4: in.CardLast4, CardBrand: in.CardBrand, GatewayKey: GatewayKeyFor(id),
	}
	// One atomic insert that does nothing if the order already has a live (pending or
	// succeeded) payment: the partial unique index payments_one_live_per_order decides, also
	// between two transactions racing on PostgreSQL. No check-then-insert.
	res := tx.Clauses(clause.OnConflict{
		Columns:     []clause.Column{{Name: "order_id"}},
		TargetWhere: clause.Where{Exprs: []clause.Expression{clause.Expr{SQL: "status IN ('pending', 'succeeded')"}}},
		DoNothing:   true,
	}).Create(p)
	if res.Error != nil {
		return nil, fmt.Errorf("insert payment: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		var live Payment
		err := tx.Where("order_id = ? AND status IN ?", in.Order.ID, []string{PaymentPending, PaymentSucceeded}).Take(&live).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, ErrPaymentInProgress // it settled between the two statements; try again
		}
		if err != nil {
			return nil, fmt.Errorf("read the order's live payment: %w", err)
		}
		if live.Status == PaymentSucceeded {
			return nil, ErrOrderAlreadyPaid
		}
		return nil, ErrPaymentInProgress
	}
	// A new attempt: the order's hold starts again now (ExpireUnpaidOrders counts from
	// updated_at). The update is conditional on a status that can still be paid, so an order
	// expired since it was read is refused (the caller rolls the payment back), and on
	// PostgreSQL it holds the order's row until commit, so the expiry job cannot expire the
	// order under this payment. It comes after the insert on purpose: an insert that waits
	// for another payment of the order to settle must not hold the order's row meanwhile, or
	// it and the settlement (which moves the order) would wait for each other.
	held := tx.Model(&Order{}).Where("id = ? AND status IN ?", in.Order.ID, orderPredecessors[OrderExpired]).
		Update("updated_at", tx.NowFunc())
	if held.Error != nil {
		return nil, fmt.Errorf("hold order for payment: %w", held.Error)
	}
	if held.RowsAffected == 0 {
		var status string
		if err := tx.Model(&Order{}).Where("id = ?", in.Order.ID).Pluck("status", &status).Error; err != nil {
			return nil, fmt.Errorf("read order status: %w", err)
		}
		switch status {
		case OrderExpired:
			return nil, ErrOrderExpired
		case OrderPaid:
			return nil, ErrOrderAlreadyPaid
		}
		return nil, Errorf(KindNotFound, ErrNotFound.Code, "no order %q", in.Order.ID)
	}
	return p, nil
}

// GatewayKeyFor is the idempotency key the shop uses toward the gateway for a payment.
func GatewayKeyFor(paymentID string) string { return paymentID + ":charge" }

// PaymentTransition is the result of moving a payment: whether this call moved it (and so
// owns the side effects of the move), and the payment and order as they are now.
type PaymentTransition struct {
	Moved   bool
	Payment *Payment
	Order   *Order
}

// SettlePaymentTx moves a payment to status (succeeded, failed or refunded) and its order along
// with it (paid, or payment_failed), inside the caller's transaction. chargeID and declineCode
// are recorded when given. Both the request path and the webhook path settle payments through
// here, so whichever arrives first wins and the other finds the work done (Moved false).
func SettlePaymentTx(tx *gorm.DB, paymentID, status, chargeID, declineCode string) (*PaymentTransition, error) {
	if _, ok := paymentPredecessors[status]; !ok {
		return nil, fmt.Errorf("settle payment: %q is not a final status", status)
	}
	res := tx.Model(&Payment{}).Where("id = ? AND status IN ?", paymentID, paymentPredecessors[status]).
		Updates(settlement(tx, status, chargeID, declineCode))
	if res.Error != nil {
		return nil, fmt.Errorf("settle payment %s: %w", paymentID, res.Error)
	}
	moved := res.RowsAffected == 1
	if orderStatus := orderStatusOf[status]; moved && orderStatus != "" {
		ofPayment := tx.Model(&Payment{}).Select("order_id").Where("id = ?", paymentID)
		err := tx.Model(&Order{}).Where("id = (?) AND status IN ?", ofPayment, orderPredecessors[orderStatus]).
			Updates(map[string]any{"status": orderStatus, "updated_at": tx.NowFunc()}).Error
		if err != nil {
			return nil, fmt.Errorf("move order of payment %s to %s: %w", paymentID, orderStatus, err)
		}
	}
	return transitionTx(tx, paymentID, moved)
}

// SettleHeldPaymentTx is SettlePaymentTx for a caller that holds the payment and its order as
// it wrote them (the operation that created them a moment ago): when its conditional UPDATEs
// move them, it applies the same change to the held rows instead of reading them back, and
// returns them. Only when something else moved them first (a webhook settled the payment, the
// order changed) does it read them, as SettlePaymentTx does. order must have its lines loaded.
func SettleHeldPaymentTx(tx *gorm.DB, pay *Payment, order *Order, status, chargeID, declineCode string) (*PaymentTransition, error) {
	if _, ok := paymentPredecessors[status]; !ok {
		return nil, fmt.Errorf("settle payment: %q is not a final status", status)
	}
	at := tx.NowFunc()
	res := tx.Model(&Payment{}).Where("id = ? AND status IN ?", pay.ID, paymentPredecessors[status]).
		Updates(settlement(tx, status, chargeID, declineCode))
	if res.Error != nil {
		return nil, fmt.Errorf("settle payment %s: %w", pay.ID, res.Error)
	}
	if res.RowsAffected == 0 {
		return transitionTx(tx, pay.ID, false) // settled by someone else: read what they wrote
	}
	settled := *pay
	settled.Status, settled.UpdatedAt = status, at
	if chargeID != "" && settled.GatewayChargeID == nil {
		settled.GatewayChargeID = &chargeID // COALESCE(gateway_charge_id, ?)
	}
	if declineCode != "" {
		settled.DeclineCode = declineCode
	}
	moved := *order
	if orderStatus := orderStatusOf[status]; orderStatus != "" {
		res := tx.Model(&Order{}).Where("id = ? AND status IN ?", order.ID, orderPredecessors[orderStatus]).
			Updates(map[string]any{"status": orderStatus, "updated_at": at})
		if res.Error != nil {
			return nil, fmt.Errorf("move order of payment %s to %s: %w", pay.ID, orderStatus, res.Error)
		}
		if res.RowsAffected == 0 {
			return transitionTx(tx, pay.ID, true) // the order had moved on: read it
		}
		moved.Status, moved.UpdatedAt = orderStatus, at
	}
	// The order's payments, oldest first, with this one as it now is.
	moved.Payments = make([]Payment, 0, len(order.Payments)+1)
	for _, p := range order.Payments {
		if p.ID != pay.ID {
			moved.Payments = append(moved.Payments, p)
		}
	}
	moved.Payments = append(moved.Payments, settled)
	return &PaymentTransition{Moved: true, Payment: &settled, Order: &moved}, nil
}

// orderStatusOf is where a payment's order goes when the payment settles: a refund leaves it
// paid.
var orderStatusOf = map[string]string{PaymentSucceeded: OrderPaid, PaymentFailed: OrderPaymentFailed}

// settlement is the update that settles a payment at status.
func settlement(tx *gorm.DB, status, chargeID, declineCode string) map[string]any {
	set := map[string]any{"status": status, "updated_at": tx.NowFunc()}
	if chargeID != "" {
		// Keep the first charge id we learned; a second one would be a second charge, which
		// reconciliation reports rather than hides.
		set["gateway_charge_id"] = gorm.Expr("COALESCE(gateway_charge_id, ?)", chargeID)
	}
	if declineCode != "" {
		set["decline_code"] = declineCode
	}
	return set
}

// transitionTx reads the payment and its order as a settlement left them.
func transitionTx(tx *gorm.DB, paymentID string, moved bool) (*PaymentTransition, error) {
	var p Payment
	if err := tx.Where("id = ?", paymentID).Take(&p).Error; err != nil {
		return nil, fmt.Errorf("reload payment: %w", err)
	}
	o, err := getOrder(tx, p.OrderID)
	if err != nil {
		return nil, err
	}
	return &PaymentTransition{Moved: moved, Payment: &p, Order: o}, nil
}

// PaymentStore reads payments.
type PaymentStore struct{ db *gorm.DB }

// NewPaymentStore returns a PaymentStore on db.
func NewPaymentStore(db *gorm.DB) *PaymentStore { return &PaymentStore{db: db} }

// Get returns a payment by id, or ErrNotFound.
func (s *PaymentStore) Get(ctx context.Context, id string) (*Payment, error) {
	return getPayment(s.db.WithContext(ctx), id)
}

// GetTx returns a payment by id inside a transaction, or ErrNotFound.
func GetPaymentTx(tx *gorm.DB, id string) (*Payment, error) { return getPayment(tx, id) }

// GetOrderTx returns an order with its lines and payments inside a transaction.
func GetOrderTx(tx *gorm.DB, id string) (*Order, error) { return getOrder(tx, id) }

func getPayment(q *gorm.DB, id string) (*Payment, error) {
	var p Payment
	err := q.Where("id = ?", id).Take(&p).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, Errorf(KindNotFound, ErrNotFound.Code, "no payment %q", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get payment: %w", err)
	}
	return &p, nil
}

// ByChargeID finds the payment that recorded a gateway charge id, or ErrNotFound.
func (s *PaymentStore) ByChargeID(ctx context.Context, chargeID string) (*Payment, error) {
	var p Payment
	err := s.db.WithContext(ctx).Where("gateway_charge_id = ?", chargeID).Take(&p).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("payment by charge: %w", err)
	}
	return &p, nil
}
