package payments

import (
	"context"
	"fmt"
	"strings"

	"github.com/riverqueue/river"
	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/web/components"
)

// ReceiptArgs is the job that e-mails the receipt of a paid order.
type ReceiptArgs struct {
	OrderID string `json:"order_id"`
}

// Kind names the job in the queue.
func (ReceiptArgs) Kind() string { return "send_receipt" }

// ShipmentArgs is the job that asks the warehouse to ship a paid order.
type ShipmentArgs struct {
	OrderID string `json:"order_id"`
}

// Kind names the job in the queue.
func (ShipmentArgs) Kind() string { return "request_shipment" }

// EnqueueSideEffectsTx puts the receipt and shipment jobs of a newly paid order in the outbox,
// inside the transaction that marked it paid. Only the writer that actually moved the payment
// to succeeded calls it, so a webhook and a response racing to settle one payment enqueue once.
// UniqueOpts ByArgs is a second guard, and the receiving side dedupes as the last one.
func (j *Jobs) EnqueueSideEffectsTx(tx *gorm.DB, order *models.Order) error {
	unique := j.Protections.uniqueJobs()
	if err := j.InsertTx(tx, ReceiptArgs{OrderID: order.ID}, unique); err != nil {
		return err
	}
	return j.InsertTx(tx, ShipmentArgs{OrderID: order.ID}, unique)
}

// OrderReader is what the side-effect workers need to read an order.
type OrderReader interface {
	GetAnyTenant(ctx context.Context, id string) (*models.Order, error)
}

// SideEffectWriter is the receiving side of the outbox: the mailbox and the warehouse.
type SideEffectWriter interface {
	DeliverReceipt(ctx context.Context, m *models.MailboxMessage) (bool, error)
	RequestShipment(ctx context.Context, s *models.Shipment) (bool, error)
}

// ReceiptWorker delivers receipts to the local mailbox.
type ReceiptWorker struct {
	river.WorkerDefaults[ReceiptArgs]
	Orders  OrderReader
	Effects SideEffectWriter
	Journal Journal // optional: records each delivery, written or deduplicated
	// Protections is all on (the zero value) except in the failure lab; see Protections.
	Protections Protections
	// OrderLink is the absolute URL of an order's page that the receipt carries: a signed
	// link, since the page opens only for the session that placed the order or with that link.
	// Nil leaves the link out.
	OrderLink func(orderID string) string
}

// Work writes one receipt. Running it twice writes one message: the dedupe key is the order.
func (w *ReceiptWorker) Work(ctx context.Context, job *river.Job[ReceiptArgs]) error {
	o, err := w.Orders.GetAnyTenant(ctx, job.Args.OrderID)
	if err != nil {
		return fmt.Errorf("receipt for %s: %w", job.Args.OrderID, err)
	}
	written, err := w.Effects.DeliverReceipt(ctx, &models.MailboxMessage{
		TenantID: o.TenantID, OrderID: o.ID, ToAddress: o.Email, DedupeKey: w.Protections.dedupeKey("receipt:" + o.ID),
		Subject: fmt.Sprintf("Your order %s is paid", o.ID),
		Body:    receiptBody(o, w.OrderLink),
	})
	if err != nil {
		return err
	}
	recordDelivery(ctx, w.Journal, o, models.JournalReceipt, written, job.Attempt)
	return nil
}

// recordDelivery journals an outbox delivery: written, or deduplicated by the receiving side
// because an earlier run (or a duplicate job) already delivered it.
func recordDelivery(ctx context.Context, j Journal, o *models.Order, kind string, written bool, attempt int) {
	detail := fmt.Sprintf("delivered: %s written (job attempt %d)", kind, attempt)
	if !written {
		detail = fmt.Sprintf("deduplicated: the %s was already delivered, nothing written (job attempt %d)", kind, attempt)
	}
	record(j, ctx, models.JournalEvent{TenantID: o.TenantID, OrderID: o.ID, Actor: models.ActorOutbox, Kind: kind, Detail: detail})
}

// receiptBody is the e-mail a customer reads: money and the country written as the shop's
// pages write them ("$268.00", "United Kingdom"), with the same formatting functions, and
// the link to the order's page when link is set.
func receiptBody(o *models.Order, link func(orderID string) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Hello %s,\n\nthank you for your order %s. We received your payment of %s.\n\n",
		o.ShippingName, o.ID, components.Money(o.Amount, o.Currency))
	for _, l := range o.Lines {
		fmt.Fprintf(&b, "  %d × %s\n", l.Quantity, l.Name)
	}
	fmt.Fprintf(&b, "\nIt ships (%s) to %s, %s %s, %s.\n", o.ShippingMethod, o.ShippingAddress, o.ShippingPostalCode, o.ShippingCity, components.CountryName(o.ShippingCountry))
	if link != nil {
		fmt.Fprintf(&b, "\nYour order: %s\n", link(o.ID))
	}
	return b.String()
}

// ShipmentWorker hands paid orders to the warehouse.
type ShipmentWorker struct {
	river.WorkerDefaults[ShipmentArgs]
	Orders  OrderReader
	Effects SideEffectWriter
	Journal Journal // optional: records each request, written or deduplicated
	// Protections is all on (the zero value) except in the failure lab; see Protections.
	Protections Protections
}

// Work requests one shipment. Running it twice requests one: the dedupe key is the order.
func (w *ShipmentWorker) Work(ctx context.Context, job *river.Job[ShipmentArgs]) error {
	o, err := w.Orders.GetAnyTenant(ctx, job.Args.OrderID)
	if err != nil {
		return fmt.Errorf("shipment for %s: %w", job.Args.OrderID, err)
	}
	written, err := w.Effects.RequestShipment(ctx, &models.Shipment{TenantID: o.TenantID, OrderID: o.ID,
		DedupeKey: w.Protections.dedupeKey("shipment:" + o.ID)})
	if err != nil {
		return err
	}
	recordDelivery(ctx, w.Journal, o, models.JournalShipment, written, job.Attempt)
	return nil
}
