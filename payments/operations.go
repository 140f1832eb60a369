package payments

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"gorm.io/gorm"

	"checkoutlab/models"
)

// CheckoutRequest is a one-step checkout: the order to place and the card to pay it with.
type CheckoutRequest struct {
	Order      models.NewOrder
	CardNumber string
}

// PaymentRequest pays an existing order. Amount and Currency must equal the order's total.
type PaymentRequest struct {
	TenantID   string
	OrderID    string
	Amount     int64
	Currency   string
	CardNumber string
}

// Checkout places an order and pays for it, as one operation under key. endpoint names the
// route the key was made for (API or storefront): the answer is rendered for it.
//
// On a fresh key it validates the order, exchanges the card for a gateway payment method,
// then commits the order, a pending payment and the recovery point payment_created in one
// transaction, and charges. On a key that a previous attempt left at payment_created it skips
// straight to the charge step, which first asks the gateway what happened.
//
// It returns the stored response for every final outcome, including a decline (402). Errors:
// invalid_request, unknown_product (not stored: the key may be reused); out_of_stock (a
// business outcome the caller stores); gateway_unavailable (503) and payment_outcome_unknown
// (502/504), after which the key must be released so a retry resumes; ErrLeaseLost.
func (s *Service) Checkout(ctx context.Context, key Key, endpoint string, req CheckoutRequest) (models.Response, error) {
	if key.RecoveryPoint() != PointStarted {
		return s.charge(ctx, key, endpoint, true)
	}
	s.crash(CrashAfterKeyReserved)
	req.Order.Normalize()
	if err := req.Order.Validate(); err != nil {
		return models.Response{}, err
	}
	pm, err := s.paymentMethod(ctx, req.CardNumber)
	if err != nil {
		return models.Response{}, err
	}
	err = s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		order, err := models.CreateOrderTx(tx, req.Order)
		if err != nil {
			return err
		}
		return s.createPaymentTx(tx, key, order, pm)
	})
	if err != nil {
		return models.Response{}, err
	}
	s.crash(CrashAfterOrderCreated)
	return s.charge(ctx, key, endpoint, false)
}

// Pay pays an existing order, as one operation under key. It behaves like Checkout without
// the order phase. Extra errors: not_found for an order of another tenant, invalid_request
// when amount or currency differ from the order's, ErrOrderAlreadyPaid and
// ErrPaymentInProgress (business outcomes, stored).
func (s *Service) Pay(ctx context.Context, key Key, endpoint string, req PaymentRequest) (models.Response, error) {
	if key.RecoveryPoint() != PointStarted {
		return s.charge(ctx, key, endpoint, true)
	}
	s.crash(CrashAfterKeyReserved)
	order, err := models.NewOrderStore(s.DB).Get(ctx, req.TenantID, req.OrderID)
	if err != nil {
		return models.Response{}, err
	}
	if order.Status == models.OrderPaid {
		return models.Response{}, models.ErrOrderAlreadyPaid
	}
	if req.Amount != order.Amount || req.Currency != order.Currency {
		return models.Response{}, &models.Error{Kind: models.KindInvalid, Code: "amount_mismatch",
			Message: fmt.Sprintf("the payment must be for the order total, %d %s", order.Amount, order.Currency),
			Fields:  map[string]string{"amount": "must equal the order total"}}
	}
	pm, err := s.paymentMethod(ctx, req.CardNumber)
	if err != nil {
		return models.Response{}, err
	}
	err = s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// Read the order again inside the transaction: it may have been paid meanwhile.
		current, err := models.GetOrderTx(tx, order.ID)
		if err != nil {
			return err
		}
		return s.createPaymentTx(tx, key, current, pm)
	})
	if err != nil {
		return models.Response{}, err
	}
	s.crash(CrashAfterOrderCreated)
	return s.charge(ctx, key, endpoint, false)
}

// createPaymentTx is the second half of the first phase: the pending payment with its derived
// gateway key, linked to the idempotency key, and the recovery point — all in the caller's
// transaction, so they commit with the order or not at all.
func (s *Service) createPaymentTx(tx *gorm.DB, key Key, order *models.Order, pm GatewayPaymentMethod) error {
	pay, err := models.CreatePaymentTx(tx, models.NewPayment{
		TenantID: order.TenantID, Order: order, PaymentMethodID: pm.ID, CardLast4: pm.Last4, CardBrand: pm.Brand,
	})
	if err != nil {
		return err
	}
	if err := key.LinkTx(tx, order.ID, pay.ID); err != nil {
		return err
	}
	if err := key.AdvanceTx(tx, PointPaymentCreated); err != nil {
		return err
	}
	return recordTx(s.Journal, tx, models.JournalEvent{TenantID: order.TenantID, IdempotencyKey: keyName(key),
		OrderID: order.ID, PaymentID: pay.ID, Actor: models.ActorDatabase, Kind: models.JournalPhase,
		Detail: "payment_created: the order and a pending payment with its gateway key are committed; a retry asks the gateway before charging"})
}

// paymentMethod exchanges the card for a gateway payment method, so that no card number is
// ever stored by the shop and a retry (or the completer) can charge without it.
func (s *Service) paymentMethod(ctx context.Context, card string) (GatewayPaymentMethod, error) {
	card = strings.ReplaceAll(strings.TrimSpace(card), " ", "")
	if !plausibleCard(card) {
		return GatewayPaymentMethod{}, invalidCard()
	}
	pm, err := s.Gateway.CreatePaymentMethod(ctx, card)
	var gwErr *GatewayError
	if errors.As(err, &gwErr) && gwErr.Status >= 400 && gwErr.Status < 500 && gwErr.Status != 429 {
		return GatewayPaymentMethod{}, invalidCard()
	}
	if err != nil {
		return GatewayPaymentMethod{}, &models.Error{Kind: models.KindUnavailable, Code: "gateway_unavailable",
			Message: "the payment provider could not be reached; nothing was charged, retry with the same Idempotency-Key", Err: err}
	}
	return pm, nil
}

func invalidCard() *models.Error {
	return models.Invalid("The card number is not valid.", map[string]string{"card_number": "Enter a valid card number."})
}

func plausibleCard(s string) bool {
	if len(s) < 12 || len(s) > 19 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// charge is the second phase: find out, or bring about, the gateway's outcome for the
// payment, and then record it. If the payment was already settled (a webhook got there
// first), it only records the answer. If the operation is resumed, it asks the gateway what
// happened under the payment's gateway key before charging, and charges only if nothing is
// there — always with that same derived key, never a new one.
func (s *Service) charge(ctx context.Context, key Key, endpoint string, resumed bool) (models.Response, error) {
	// From here on the work goes on if the client hangs up: a charge cut short by a closed
	// tab would only turn a clean outcome into an unknown one. The gateway client has its own
	// timeout, and every write is fenced on the key, so nothing runs away.
	ctx = context.WithoutCancel(ctx)
	pay, err := models.NewPaymentStore(s.DB).Get(ctx, key.PaymentID())
	if err != nil {
		return models.Response{}, fmt.Errorf("resume payment of key: %w", err)
	}
	if pay.Status != models.PaymentPending {
		return s.finish(ctx, key, endpoint, pay.ID, "", "", "")
	}

	var result ChargeResult
	found := false
	ev := models.JournalEvent{TenantID: pay.TenantID, IdempotencyKey: keyName(key), OrderID: pay.OrderID,
		PaymentID: pay.ID, Actor: models.ActorGateway}
	gatewayKey, resumed := s.Protections.chargeAttempt(pay, resumed)
	if resumed {
		charges, err := s.Gateway.FindCharges(ctx, gatewayKey)
		if err != nil {
			ev.Kind, ev.Detail = models.JournalGatewayLookup, "failed: the gateway could not be asked what happened under the payment's key"
			record(s.Journal, ctx, ev)
			return models.Response{}, &models.Error{Kind: models.KindUnavailable, Code: "gateway_unavailable",
				Message: "the payment provider could not be asked about this payment; retry with the same Idempotency-Key, you will not be charged twice", Err: err}
		}
		result, found = resultFromLedger(charges)
	}
	if !found {
		result = s.Gateway.Charge(ctx, ChargeRequest{
			Amount: pay.Amount, Currency: pay.Currency, PaymentMethod: pay.PaymentMethodID,
			IdempotencyKey: gatewayKey,
			Metadata:       map[string]string{"tenant": pay.TenantID, "order_id": pay.OrderID, "payment_id": pay.ID},
		})
		s.crash(CrashAfterGatewayCharge)
	}
	s.logger().InfoContext(ctx, "gateway charge", "payment_id", pay.ID, "outcome", result.Outcome.String(), "resumed", resumed, "from_ledger", found)
	switch {
	case found:
		ev.Kind, ev.Detail = models.JournalGatewayLookup, "found the charge under the payment's key, no new charge: "+chargeDetail(result)
	case resumed:
		ev.Kind, ev.Detail = models.JournalGatewayCharge, chargeDetail(result)+" (the lookup found nothing under the key first)"
	default:
		ev.Kind, ev.Detail = models.JournalGatewayCharge, chargeDetail(result)
	}
	record(s.Journal, ctx, ev)

	switch result.Outcome {
	case OutcomeSucceeded:
		return s.finish(ctx, key, endpoint, pay.ID, models.PaymentSucceeded, result.Charge.ID, "")
	case OutcomeDeclined:
		chargeID := ""
		if result.Charge != nil {
			chargeID = result.Charge.ID
		}
		return s.finish(ctx, key, endpoint, pay.ID, models.PaymentFailed, chargeID, result.DeclineCode)
	case OutcomeRejected:
		// The gateway will never accept this request as it stands: the payment fails (402),
		// and the customer may pay the order with another card.
		s.logger().WarnContext(ctx, "gateway rejected the charge", "payment_id", pay.ID, "err", result.Err)
		return s.finish(ctx, key, endpoint, pay.ID, models.PaymentFailed, "", "processing_error")
	case OutcomeNotCharged:
		return models.Response{}, &models.Error{Kind: models.KindUnavailable, Code: "gateway_unavailable",
			Message: "the payment provider is unavailable and nothing was charged; retry with the same Idempotency-Key", Err: result.Err}
	default:
		// The charge may exist. The payment stays pending; the key is released with its
		// progress, so a retry (or the completer, or the webhook) settles it without a second
		// charge. The answer must not read as a failure that invites paying again.
		kind := models.KindBadGateway
		var ne net.Error
		if errors.As(result.Err, &ne) && ne.Timeout() || errors.Is(result.Err, context.DeadlineExceeded) {
			kind = models.KindTimeout
		}
		return models.Response{}, &models.Error{Kind: kind, Code: "payment_outcome_unknown",
			Message: "we could not confirm the payment with the provider yet; retry with the same Idempotency-Key — you will not be charged twice",
			Err:     result.Err}
	}
}

// resultFromLedger turns what the gateway holds under a key into a charge result. A charge
// that succeeded (even if refunded since) means the money moved; otherwise a failed one means
// the card was declined; nothing means the gateway never charged.
func resultFromLedger(charges []GatewayCharge) (ChargeResult, bool) {
	for i := range charges {
		if c := charges[i]; c.Status == "succeeded" || c.Status == "refunded" {
			return ChargeResult{Outcome: OutcomeSucceeded, Charge: &c}, true
		}
	}
	for i := range charges {
		if c := charges[i]; c.Status == "failed" {
			return ChargeResult{Outcome: OutcomeDeclined, Charge: &c, DeclineCode: c.FailureCode}, true
		}
	}
	return ChargeResult{}, false
}

// finish is the last phase: in one transaction it settles the payment (unless status is ""),
// enqueues the side effects if this call is the one that made it succeed, renders the answer
// and completes the key with it. A crash before the commit leaves the key at
// payment_created, to be resumed; after it, the answer is stored and will be replayed.
func (s *Service) finish(ctx context.Context, key Key, endpoint, paymentID, status, chargeID, declineCode string) (models.Response, error) {
	var resp models.Response
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var order *models.Order
		var pay *models.Payment
		if status != "" {
			t, err := s.Protections.settleTx(tx, paymentID, status, chargeID, declineCode)
			if err != nil {
				return err
			}
			// Only the writer that moved the payment to succeeded enqueues its side effects:
			// a webhook that got there first already did.
			if s.Protections.enqueuesSideEffects(t, status) {
				if err := s.Outbox.EnqueueSideEffectsTx(tx, t.Order); err != nil {
					return err
				}
			}
			order, pay = t.Order, t.Payment
		} else {
			var err error
			if pay, err = models.GetPaymentTx(tx, paymentID); err != nil {
				return err
			}
			if order, err = models.GetOrderTx(tx, pay.OrderID); err != nil {
				return err
			}
		}
		out := Result{Endpoint: endpoint, Order: order, Payment: pay}
		if pay.Status == models.PaymentFailed {
			out.Err = Declined(pay.DeclineCode)
		}
		var err error
		if resp, err = s.Render(out); err != nil {
			return fmt.Errorf("render outcome: %w", err)
		}
		if err := key.CompleteTx(tx, resp); err != nil {
			return err
		}
		return recordTx(s.Journal, tx, models.JournalEvent{TenantID: pay.TenantID, IdempotencyKey: keyName(key),
			OrderID: order.ID, PaymentID: pay.ID, Actor: models.ActorDatabase, Kind: models.JournalPhase,
			Detail: fmt.Sprintf("finished: payment %s, order %s, answer %d stored with the key", pay.Status, order.Status, resp.Status)})
	})
	if err != nil {
		return models.Response{}, err
	}
	s.crash(CrashBeforeResponse)
	return resp, nil
}

// Declined is the business error of a declined card: 402 with the gateway's decline code.
func Declined(code string) *models.Error {
	if code == "" {
		code = "card_declined"
	}
	msg := "Your card was declined. Try another card."
	switch code {
	case "insufficient_funds":
		msg = "Your card was declined: insufficient funds. Try another card."
	case "processing_error":
		msg = "The payment provider refused this payment. Nothing was charged; try another card."
	}
	return &models.Error{Kind: models.KindDeclined, Code: "card_declined", Message: msg,
		Fields: map[string]string{"decline_code": code}}
}
