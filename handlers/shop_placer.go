package handlers

import (
	"context"

	"checkoutlab/models"
)

// OrderCreator is what PendingOrderPlacer needs from the order store.
type OrderCreator interface {
	Create(ctx context.Context, in models.NewOrder) (*models.Order, error)
}

// PendingOrderPlacer places an order and stops there: the order waits in pending_payment.
// It is the OrderPlacer until payments exist; the card number was checked for shape by the
// handler and is dropped here on purpose. Errors are the order store's (invalid_request,
// unknown_product, out_of_stock, models.ErrCartConverted).
type PendingOrderPlacer struct {
	Orders OrderCreator
}

// PlaceOrder creates the order from in; cardNumber is ignored until the payment issue.
func (p PendingOrderPlacer) PlaceOrder(ctx context.Context, in models.NewOrder, _ string) (*models.Order, error) {
	return p.Orders.Create(ctx, in)
}
