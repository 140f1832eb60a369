package payments

import (
	"context"
	"errors"
	"fmt"
	"net"

	"gorm.io/gorm"

	"checkoutlab/models"
)

// Operation names what an operation under an idempotency key does; its answer is rendered for
// it. The handlers map their routes to these (handlers.PaymentEndpoints).
type Operation string

const (
	OperationCheckout Operation = "checkout" // place an order and pay for it
	OperationPayment  Operation = "payment"  // pay an existing order
)

// CheckoutRequest is a one-step checkout: the order to place and the card to pay it with (its
// digits, nothing else), for PaymentRequest too. The caller has validated the order (Order.Validate): the API once the key is reserved, so that
// a 400 forgets the key; the storefront before, to show the form's errors.
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

// Checkout places an order and pays for it, as one operation under key.
//
// On a fresh key its first phase exchanges the card for a gateway payment method, then commits
// the order, a pending payment and the recovery point payment_created in one transaction. On a
// key that a previous attempt left at payment_created it goes straight to the charge, which
// first asks the gateway what happened.
//
// It returns the answer for every final outcome, including a decline (402). Errors:
// invalid_request for a card number that is not one, unknown_product (not stored: the key may be
// reused); out_of_stock (a business outcome the caller stores); gateway_unavailable (503) and
// payment_outcome_unknown (502/504), after which the key must be released so a retry
// resumes; ErrLeaseLost.
func (s *Service) Checkout(ctx context.Context, key Key, req CheckoutRequest) (models.Response, error) {
	return s.run(ctx, key, OperationCheckout, func(ctx context.Context) (*held, error) {
		pm, err := s.paymentMethod(ctx, req.CardNumber)
		if err != nil {
			return nil, err
		}
		var h *held
		// The key's own INSERT, for a fresh key, is the first statement of this transaction
		// (Key.Transaction): the reservation commits with the order or not at all.
		err = key.Transaction(s.DB.WithContext(ctx), func(tx *gorm.DB) error {
			order, err := models.CreateOrderTx(tx, req.Order)
			if err != nil {
				return err
			}
			h, err = s.createPaymentTx(tx, key, order, pm)
			return err
		})
		return h, err
	})
}

// Pay pays an existing order, as one operation under key. It is Checkout with another first
// phase: the order exists already. Extra errors: not_found for an order of another tenant,
// amount_mismatch when amount or currency differ from the order's, ErrOrderAlreadyPaid and
// ErrPaymentInProgress (business outcomes, stored).
func (s *Service) Pay(ctx context.Context, key Key, req PaymentRequest) (models.Response, error) {
	return s.run(ctx, key, OperationPayment, func(ctx context.Context) (*held, error) {
		order, err := models.NewOrderStore(s.DB).Get(ctx, req.TenantID, req.OrderID)
		if err != nil {
			return nil, err
		}
		if order.Status == models.OrderPaid {
			return nil, models.ErrOrderAlreadyPaid
		}
		if req.Amount != order.Amount || req.Currency != order.Currency {
			return nil, models.ErrAmountMismatch.Msgf("the payment must be for the order total, %d %s", order.Amount, order.Currency).
				WithFields(map[string]string{"amount": "must equal the order total"})
		}
		pm, err := s.paymentMethod(ctx, req.CardNumber)
		if err != nil {
			return nil, err
		}
		var h *held
		err = key.Transaction(s.DB.WithContext(ctx), func(tx *gorm.DB) error {
			// Read the order again inside the transaction: it may have been paid meanwhile.
			current, err := models.GetOrderTx(tx, order.ID)
			if err != nil {
				return err
			}
			h, err = s.createPaymentTx(tx, key, current, pm)
			return err
		})
		return h, err
	})
}

// held is what the first phase wrote, kept so that the rest of the operation works from it
// instead of reading it back: the order with its lines and payments, and the new payment.
// A resumed operation (a takeover, the completer) holds nothing and reads them.
type held struct {
	order *models.Order
	pay   *models.Payment
}

// run drives an operation through its phases, as rocket-rides-atomic's api.rb does: a loop
// over the key's recovery point, where each phase commits its work together with the next
// recovery point, and the last one with the answer. The two operations differ only in
// createPayment, their first phase; a key that an earlier attempt (or a crashed process) left
// further on resumes there.
func (s *Service) run(ctx context.Context, key Key, op Operation, createPayment func(context.Context) (*held, error)) (models.Response, error) {
	resumed := key.RecoveryPoint() != PointStarted
	var h *held
	for {
		switch point := key.RecoveryPoint(); point {
		case PointStarted:
			s.crash(CrashAfterKeyReserved)
			phaseCtx, span := startPhase(ctx, "create_payment", key)
			var err error
			h, err = createPayment(phaseCtx)
			endPhase(span, err)
			if err != nil {
				return models.Response{}, err
			}
			s.crash(CrashAfterOrderCreated)
			// The key is at payment_created now: go round to the charge.
		case PointPaymentCreated:
			return s.charge(ctx, key, op, resumed, h)
		default:
			return models.Response{}, fmt.Errorf("%s under key %q: no phase resumes at %q", op, keyName(key), point)
		}
	}
}

// createPaymentTx ends the first phase: the pending payment with its derived gateway key,
// linked to the idempotency key, and the recovery point payment_created — all in the caller's
// transaction, so they commit with the order or not at all.
func (s *Service) createPaymentTx(tx *gorm.DB, key Key, order *models.Order, pm GatewayPaymentMethod) (*held, error) {
	pay, err := models.CreatePaymentTx(tx, models.NewPayment{
		TenantID: order.TenantID, Order: order, PaymentMethodID: pm.ID, CardLast4: pm.Last4, CardBrand: pm.Brand,
	})
	if err != nil {
		return nil, err
	}
	// The links and the recovery point in one UPDATE of the key's row.
	if err := key.ProgressTx(tx, PointPaymentCreated, order.ID, pay.ID); err != nil {
		return nil, err
	}
	return &held{order: order, pay: pay}, recordTx(s.Journal, tx, models.JournalEvent{TenantID: order.TenantID, IdempotencyKey: keyName(key),
		OrderID: order.ID, PaymentID: pay.ID, Actor: models.ActorDatabase, Kind: models.JournalPhase,
		Detail: "payment_created: the order and a pending payment with its gateway key are committed; a retry asks the gateway before charging"})
}

// paymentMethod exchanges the card for a gateway payment method, so that no card number is
// ever stored by the shop and a retry (or the completer) can charge without it.
func (s *Service) paymentMethod(ctx context.Context, card string) (GatewayPaymentMethod, error) {
	if !plausibleCard(card) {
		return GatewayPaymentMethod{}, ErrInvalidCard // not worth a call to the gateway
	}
	pm, err := s.Gateway.CreatePaymentMethod(ctx, card)
	var gwErr *GatewayError
	if errors.As(err, &gwErr) && gwErr.Status >= 400 && gwErr.Status < 500 && gwErr.Status != 429 {
		return GatewayPaymentMethod{}, ErrInvalidCard
	}
	if err != nil {
		return GatewayPaymentMethod{}, models.ErrGatewayUnavailable.Wrap(err)
	}
	return pm, nil
}

// ErrInvalidCard is the answer to a card number that is not one: not 12 to 19 digits, or
// refused by the gateway.
var ErrInvalidCard = models.Invalid("The card number is not valid.", map[string]string{"card_number": "Enter a valid card number."})

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

// charge is the second phase: find out, or bring about, the gateway's outcome for the payment,
// then record it. A payment that is settled already (a webhook got there first) only gets its
// answer recorded. A resumed attempt first asks the gateway what happened under the payment's
// gateway key and charges only if nothing is there — always under that same derived key,
// never a new one.
func (s *Service) charge(ctx context.Context, key Key, op Operation, resumed bool, h *held) (models.Response, error) {
	// From here on the work goes on if the client hangs up: a charge cut short by a closed
	// tab would only turn a clean outcome into an unknown one. The gateway client has its own
	// timeout, and every write is fenced on the key, so nothing runs away.
	ctx = context.WithoutCancel(ctx)
	ctx, span := startPhase(ctx, "charge", key)
	defer span.End()
	if h == nil {
		// Resumed: the first phase ran in an earlier attempt; read what it wrote.
		pay, err := models.NewPaymentStore(s.DB).Get(ctx, key.PaymentID())
		if err != nil {
			return models.Response{}, fmt.Errorf("resume payment of key: %w", err)
		}
		if pay.Status != models.PaymentPending {
			return s.finish(ctx, key, op, settlement{paymentID: pay.ID}, nil)
		}
		h = &held{pay: pay}
	}
	pay := h.pay
	gatewayKey, lookUpFirst := s.Protections.chargeAttempt(pay, resumed)
	var result ChargeResult
	found := false
	if lookUpFirst {
		var err error
		if result, found, err = s.lookUp(ctx, key, pay, gatewayKey); err != nil {
			return models.Response{}, err
		}
	}
	if !found {
		result = s.Gateway.Charge(ctx, ChargeRequest{
			Amount: pay.Amount, Currency: pay.Currency, PaymentMethod: pay.PaymentMethodID,
			IdempotencyKey: gatewayKey,
			Metadata:       map[string]string{"tenant": pay.TenantID, "order_id": pay.OrderID, "payment_id": pay.ID},
		})
		s.crash(CrashAfterGatewayCharge)
	}
	s.noteCharge(ctx, key, pay, result, lookUpFirst, found)
	return s.record(ctx, key, op, h, result)
}

// lookUp asks the gateway what it holds under gatewayKey: the previous attempt may have
// charged and died before it could record the outcome.
func (s *Service) lookUp(ctx context.Context, key Key, pay *models.Payment, gatewayKey string) (ChargeResult, bool, error) {
	charges, err := s.Gateway.FindCharges(ctx, gatewayKey)
	if err != nil {
		s.journalGateway(ctx, key, pay, models.JournalGatewayLookup, "failed: the gateway could not be asked what happened under the payment's key")
		return ChargeResult{}, false, models.ErrGatewayUnavailable.Wrap(err).
			Msgf("the payment provider could not be asked about this payment; retry with the same Idempotency-Key, you will not be charged twice")
	}
	// Only a charge for this payment's amount and currency is its outcome; any other one
	// under its key is recorded and left to reconciliation.
	if charges, err = s.ownCharges(ctx, key, pay, charges); err != nil {
		return ChargeResult{}, false, err
	}
	result, found := resultFromLedger(charges)
	return result, found, nil
}

// noteCharge logs and journals what the gateway said: found under the key, or charged.
func (s *Service) noteCharge(ctx context.Context, key Key, pay *models.Payment, result ChargeResult, lookedUp, found bool) {
	s.logger().InfoContext(ctx, "gateway charge", "payment_id", pay.ID, "outcome", result.Outcome.String(), "resumed", lookedUp, "from_ledger", found)
	switch {
	case found:
		s.journalGateway(ctx, key, pay, models.JournalGatewayLookup, "found the charge under the payment's key, no new charge: "+chargeDetail(result))
	case lookedUp:
		s.journalGateway(ctx, key, pay, models.JournalGatewayCharge, chargeDetail(result)+" (the lookup found nothing under the key first)")
	default:
		s.journalGateway(ctx, key, pay, models.JournalGatewayCharge, chargeDetail(result))
	}
}

func (s *Service) journalGateway(ctx context.Context, key Key, pay *models.Payment, kind, detail string) {
	record(s.Journal, ctx, models.JournalEvent{TenantID: pay.TenantID, IdempotencyKey: keyName(key), OrderID: pay.OrderID,
		PaymentID: pay.ID, Actor: models.ActorGateway, Kind: kind, Detail: detail})
}

// record turns the gateway's outcome into the last phase, or into the error that releases the
// key with its progress.
func (s *Service) record(ctx context.Context, key Key, op Operation, h *held, result ChargeResult) (models.Response, error) {
	pay := h.pay
	switch result.Outcome {
	case OutcomeSucceeded:
		return s.finish(ctx, key, op, settlement{paymentID: pay.ID, status: models.PaymentSucceeded, chargeID: result.Charge.ID}, h)
	case OutcomeDeclined:
		chargeID := ""
		if result.Charge != nil {
			chargeID = result.Charge.ID
		}
		return s.finish(ctx, key, op, settlement{paymentID: pay.ID, status: models.PaymentFailed, chargeID: chargeID,
			declineCode: result.DeclineCode}, h)
	case OutcomeRejected:
		// The gateway will never accept this request as it stands: the payment fails (402),
		// and the customer may pay the order with another card.
		s.logger().WarnContext(ctx, "gateway rejected the charge", "payment_id", pay.ID, "err", result.Err)
		return s.finish(ctx, key, op, settlement{paymentID: pay.ID, status: models.PaymentFailed, declineCode: "processing_error"}, h)
	case OutcomeNotCharged:
		return models.Response{}, models.ErrGatewayUnavailable.Wrap(result.Err)
	default:
		// The charge may exist. The payment stays pending; the key is released with its
		// progress, so a retry (or the completer, or the webhook) settles it without a second
		// charge. The answer must not read as a failure that invites paying again.
		unknown := models.ErrPaymentOutcomeUnknown.Wrap(result.Err)
		var ne net.Error
		if errors.As(result.Err, &ne) && ne.Timeout() || errors.Is(result.Err, context.DeadlineExceeded) {
			unknown.Kind = models.KindTimeout
		}
		return models.Response{}, unknown
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

// settlement is what the last phase writes: the payment's outcome, or, with status "", nothing
// but the answer (a webhook settled the payment first).
type settlement struct {
	paymentID   string
	status      string
	chargeID    string
	declineCode string
}

// finish is the last phase: in one transaction it settles the payment, enqueues the side
// effects if this call is the one that made it succeed, renders the answer and completes the
// key with it (recovery point finished). A crash before the commit leaves the key at
// payment_created, to be resumed; after it, the answer is stored and will be replayed.
//
// h, when the first phase ran in this request, is the order and payment it wrote: the answer
// is rendered from them, with the settlement applied, rather than read back (see
// models.SettleHeldPaymentTx). The completer and a resumed request hold nothing and read.
func (s *Service) finish(ctx context.Context, key Key, op Operation, outcome settlement, h *held) (models.Response, error) {
	ctx, span := startPhase(ctx, "finish", key)
	var resp models.Response
	err := key.Transaction(s.DB.WithContext(ctx), func(tx *gorm.DB) error {
		order, pay, err := s.settleTx(tx, outcome, h)
		if err != nil {
			return err
		}
		out := Result{Operation: op, Order: order, Payment: pay}
		if pay.Status == models.PaymentFailed {
			out.Err = Declined(pay.DeclineCode)
		}
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
	endPhase(span, err)
	if err != nil {
		return models.Response{}, err
	}
	s.crash(CrashBeforeResponse)
	return resp, nil
}

// settleTx writes the outcome, and returns the order and payment as they now are. Only the
// writer that moved the payment to succeeded enqueues its side effects: a webhook that got
// there first already did.
func (s *Service) settleTx(tx *gorm.DB, outcome settlement, h *held) (*models.Order, *models.Payment, error) {
	if outcome.status == "" {
		pay, err := models.GetPaymentTx(tx, outcome.paymentID)
		if err != nil {
			return nil, nil, err
		}
		order, err := models.GetOrderTx(tx, pay.OrderID)
		return order, pay, err
	}
	var t *models.PaymentTransition
	var err error
	if h != nil && h.order != nil {
		t, err = s.Protections.settleHeldTx(tx, h.pay, h.order, outcome.status, outcome.chargeID, outcome.declineCode)
	} else {
		t, err = s.Protections.settleTx(tx, outcome.paymentID, outcome.status, outcome.chargeID, outcome.declineCode)
	}
	if err != nil {
		return nil, nil, err
	}
	if s.Protections.enqueuesSideEffects(t, outcome.status) {
		if err := s.Outbox.EnqueueSideEffectsTx(tx, t.Order); err != nil {
			return nil, nil, err
		}
	}
	return t.Order, t.Payment, nil
}

// Declined is the business error of a declined card: 402 with the gateway's decline code.
func Declined(code string) *models.Error {
	if code == "" {
		code = "card_declined" // the gateway's generic decline code
	}
	declined := models.ErrCardDeclined.WithFields(map[string]string{"decline_code": code})
	switch code {
	case "insufficient_funds":
		return declined.Msgf("Your card was declined: insufficient funds. Try another card.")
	case "processing_error":
		return declined.Msgf("The payment provider refused this payment. Nothing was charged; try another card.")
	case "abandoned":
		return declined.Msgf("This payment could not be confirmed and was cancelled by the shop. Nothing was charged.")
	}
	return declined
}
