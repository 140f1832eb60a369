package payments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"checkoutlab/models"
)

// The triage desk: what reconciliation finds, a person can resolve. Each action is allowed
// only on the findings it repairs, and only if what the gateway shows at that moment allows it;
// anything else is refused (409 action_not_allowed) with nothing done. Every action taken is a
// decision, recorded with who took it, the findings, what the gateway showed, what it came to
// and the reason typed — in the decisions list and in the order's journal.
//
// A timeout is a signal to recover, not proof that nothing happened: no action here assumes
// what the gateway did. Each one asks it first, and each write to the gateway is keyed so that
// a second click, a retry or a second operator at the same moment does it once.

// TriageGateway is what the desk needs from the gateway. *GatewayClient is one.
type TriageGateway interface {
	FindCharges(ctx context.Context, idempotencyKey string) ([]GatewayCharge, error)
	Refund(ctx context.Context, chargeID, idempotencyKey string) (GatewayCharge, error)
}

// PaymentKeyClaimer takes over a stuck payment's idempotency key. *models.IdempotencyStore is one.
type PaymentKeyClaimer interface {
	ClaimPaymentKey(ctx context.Context, tenantID, paymentID string, lease time.Duration) (*models.ClaimedKey, error)
}

// Triage runs the desk's actions.
type Triage struct {
	DB         *gorm.DB
	Reconciler *Reconciler // what the report says about the order, with the ledger behind it
	Gateway    TriageGateway
	// Webhooks applies what "check now" finds, through the same path as a webhook.
	Webhooks *WebhookProcessor
	// Service resumes a stuck operation through the completer's path, and renders the
	// answer stored with the key of one settled as failed.
	Service *Service
	// Endpoints maps the endpoint a key was reserved on to its operation, as the completer's
	// (handlers.PaymentEndpoints).
	Endpoints map[string]Operation
	Keys      PaymentKeyClaimer
	Lease     time.Duration // IDEMPOTENCY_LEASE: how long a claimed key stays the desk's
	Journal   Journal
	Logger    *slog.Logger
}

// ActionRequest is one action on one order. Who names the person or program (an operator's
// session or an API key, as a principal: never the credential itself).
type ActionRequest struct {
	TenantID string
	OrderID  string
	Action   string
	// Outcome, for settle_stuck only: SettleResume (the default) or SettleFailed.
	Outcome string
	Reason  string
	Who     string
}

// How settle_stuck settles.
const (
	SettleResume = "resume" // resume the operation now, as the completer would
	SettleFailed = "failed" // mark the payment failed and give the stock back, if nothing was charged
)

// ActionResult is what an action came to.
type ActionResult struct {
	Action     string `json:"action"`
	OrderID    string `json:"order_id"`
	Result     string `json:"result"`
	DecisionID string `json:"decision_id"`
	Detail     string `json:"detail"`
}

// Results of actions.
const (
	ResultApplied         = "applied"          // check_now: the gateway's charge moved the payment
	ResultNoChange        = "no_change"        // check_now: the payment already showed it
	ResultNothingToApply  = "nothing_to_apply" // check_now: no charge for the payment's amount under its key
	ResultRefunded        = "refunded"         // refund_extra_charge
	ResultAlreadyRefunded = "already_refunded" // refund_extra_charge: a concurrent click or a retry refunded it
	ResultResumed         = "resumed"          // settle_stuck resume: the operation reached its outcome
	ResultUnresolved      = "unresolved"       // settle_stuck resume: the gateway still could not say
	ResultFailed          = "marked_failed"    // settle_stuck failed
)

// declineAbandoned is the decline code of a payment an operator settled as failed.
const declineAbandoned = "abandoned"

// notAllowed is the refusal of an action that the finding or the gateway does not allow.
func notAllowed(format string, args ...any) *models.Error {
	return models.ErrActionNotAllowed.Msgf(format, args...)
}

// Act validates req, then runs its action on the tenant's order. Errors: invalid_request (an
// unknown action, a missing or overlong reason, an outcome for another action than
// settle_stuck); not_found (an unknown order, or another tenant's); action_not_allowed (the
// report has no finding the action repairs, or the gateway's state does not allow it: nothing
// was done); gateway_unavailable (the gateway could not be asked: nothing was done);
// refund_outcome_unknown (the refund's answer was lost: retry, it refunds once).
func (t *Triage) Act(ctx context.Context, req ActionRequest) (*ActionResult, error) {
	if err := req.validate(); err != nil {
		return nil, err
	}
	order, err := models.NewOrderStore(t.DB).Get(ctx, req.TenantID, req.OrderID)
	if err != nil {
		return nil, err
	}
	rep, chargesOf, err := t.Reconciler.report(ctx, req.TenantID)
	if err != nil {
		return nil, err
	}
	findings := rep.FindingsOf(order.ID)
	d := &models.Decision{TenantID: req.TenantID, OrderID: order.ID, Action: req.Action,
		Findings: strings.Join(findings, ","), Who: req.Who, Reason: req.Reason}
	act := map[string]func(context.Context, *models.Order, []GatewayCharge, *models.Decision, ActionRequest) (string, error){
		models.ActionCheckNow:          t.checkNow,
		models.ActionRefundExtraCharge: t.refundExtraCharge,
		models.ActionSettleStuck:       t.settleStuck,
		models.ActionDismissDuplicate:  t.dismissDuplicate,
	}[req.Action]
	if !anyOf(findings, repairs[req.Action]) {
		return nil, notAllowed("%s repairs %s; the report lists order %s under %s",
			req.Action, strings.Join(repairs[req.Action], ", "), order.ID, listOrNone(findings))
	}
	paymentID, err := act(ctx, order, chargesOf[order.ID], d, req)
	if err != nil {
		return nil, err
	}
	if d.ID == "" { // the action did not record its decision in a transaction of its own
		if err := t.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return t.decideTx(tx, d, paymentID) }); err != nil {
			return nil, err
		}
	}
	t.log().InfoContext(ctx, "triage decision", "tenant", d.TenantID, "order_id", d.OrderID, "action", d.Action,
		"result", d.Result, "decision_id", d.ID)
	return &ActionResult{Action: d.Action, OrderID: d.OrderID, Result: d.Result, DecisionID: d.ID, Detail: d.Detail}, nil
}

// repairs says which findings each action may act on.
var repairs = map[string][]string{
	models.ActionCheckNow: {FindingDoubleCharged, FindingPaidWithoutCharge, FindingUnresolvedPayment, FindingStaleOperation,
		FindingAmountMismatch, FindingChargedButNotPaid, FindingWebhookConflict},
	models.ActionRefundExtraCharge: {FindingDoubleCharged, FindingAmountMismatch, FindingChargedButNotPaid},
	models.ActionSettleStuck:       {FindingUnresolvedPayment, FindingStaleOperation},
	models.ActionDismissDuplicate:  {FindingSuspectedDuplicate},
}

func (req *ActionRequest) validate() error {
	req.Reason = strings.TrimSpace(req.Reason)
	fields := map[string]string{}
	if _, ok := repairs[req.Action]; !ok {
		fields["action"] = "Choose one of " + strings.Join(models.Actions, ", ") + "."
	}
	if strings.TrimSpace(req.OrderID) == "" {
		fields["order_id"] = "Name the order the finding is about."
	}
	switch {
	case req.Reason == "":
		fields["reason"] = "Say why: the reason is recorded with the decision."
	case !utf8.ValidString(req.Reason) || strings.ContainsRune(req.Reason, 0):
		fields["reason"] = "The reason must be plain text."
	case utf8.RuneCountInString(req.Reason) > models.MaxReasonLength:
		fields["reason"] = fmt.Sprintf("At most %d characters.", models.MaxReasonLength)
	}
	if req.Action == models.ActionSettleStuck {
		if req.Outcome == "" {
			req.Outcome = SettleResume
		}
		if req.Outcome != SettleResume && req.Outcome != SettleFailed {
			fields["outcome"] = "Choose resume or failed."
		}
	} else if req.Outcome != "" {
		fields["outcome"] = "Only settle_stuck takes an outcome."
	}
	if len(fields) > 0 {
		return models.Invalid("The action is not valid.", fields)
	}
	return nil
}

// decideTx records d and its journal line inside tx.
func (t *Triage) decideTx(tx *gorm.DB, d *models.Decision, paymentID string) error {
	if err := models.RecordDecisionTx(tx, d); err != nil {
		return err
	}
	return recordTx(t.Journal, tx, models.JournalEvent{TenantID: d.TenantID, OrderID: d.OrderID, PaymentID: paymentID,
		Actor: models.ActorShop, Kind: models.JournalDecision,
		Detail: fmt.Sprintf("%s by %s: %s — %s. Findings: %s. The gateway showed: %s. Reason: %q",
			d.Action, d.Who, d.Result, d.Detail, listOrNone(strings.Split(d.Findings, ",")), d.Gateway, d.Reason)})
}

// checkNow asks the gateway for the charges under the payment's key and applies the one that
// is its outcome (a succeeded charge first, else a declined one; only charges for its amount
// and currency) through the webhook path, as an event made from the gateway's answer. The
// event id is derived from the charge and its status, so checking twice applies it once.
func (t *Triage) checkNow(ctx context.Context, order *models.Order, _ []GatewayCharge, d *models.Decision, _ ActionRequest) (string, error) {
	pay := currentPayment(order)
	if pay == nil {
		return "", notAllowed("order %s has no payment to check", order.ID)
	}
	charges, err := t.Gateway.FindCharges(ctx, pay.GatewayKey)
	if err != nil {
		return "", gatewayUnavailable(err)
	}
	d.Gateway = describeCharges(charges)
	var own []GatewayCharge
	for _, c := range charges {
		if chargeFits(pay, c) {
			own = append(own, c)
		}
	}
	res, found := resultFromLedger(own)
	if !found {
		d.Result, d.Detail = ResultNothingToApply, fmt.Sprintf("no charge for %d %s under the key of payment %s; nothing changed", pay.Amount, pay.Currency, pay.ID)
		return pay.ID, nil
	}
	ev := GatewayEvent{ID: "triage_" + res.Charge.ID + "_" + res.Charge.Status, Type: "charge." + res.Charge.Status}
	ev.Data.Charge = *res.Charge
	decision, duplicate, err := t.Webhooks.Process(ctx, ev)
	if err != nil {
		return "", err
	}
	d.Result = ResultNoChange
	if decision == models.DecisionApplied && !duplicate {
		d.Result = ResultApplied
	}
	after, err := models.NewPaymentStore(t.DB).Get(ctx, pay.ID)
	if err != nil {
		return "", err
	}
	d.Detail = fmt.Sprintf("charge %s (%s) applied through the webhook path: payment %s is %s", res.Charge.ID, res.Charge.Status, pay.ID, after.Status)
	return pay.ID, nil
}

// refundExtraCharge refunds the newest succeeded charge of the order beyond the one it keeps
// (see extraCharge), under a key derived from the order and that charge.
func (t *Triage) refundExtraCharge(ctx context.Context, order *models.Order, charges []GatewayCharge, d *models.Decision, _ ActionRequest) (string, error) {
	d.Gateway = describeCharges(charges)
	extra, kept := extraCharge(order, charges)
	if extra == nil {
		return "", notAllowed("the gateway shows no extra charge of order %s to refund: %s", order.ID, d.Gateway)
	}
	_, err := t.Gateway.Refund(ctx, extra.ID, models.RefundKeyFor(order.ID, extra.ID))
	switch {
	case err == nil:
		d.Result = ResultRefunded
	case AlreadyRefunded(err):
		d.Result = ResultAlreadyRefunded
	default:
		var gwErr *GatewayError
		if errors.As(err, &gwErr) && gwErr.Status >= 400 && gwErr.Status < 500 {
			return "", notAllowed("the gateway refused to refund charge %s: %s", extra.ID, gwErr.Code)
		}
		// The refund may have happened. Its key is derived, so a retry refunds once.
		return "", models.ErrRefundOutcomeUnknown.Wrap(err)
	}
	how := "refunded at the gateway"
	if d.Result == ResultAlreadyRefunded {
		how = "found refunded already at the gateway (another click or a retry got there first)"
	}
	d.Detail = fmt.Sprintf("charge %s (%d %s) %s under key %s; the order keeps %s",
		extra.ID, extra.Amount, extra.Currency, how, models.RefundKeyFor(order.ID, extra.ID), orNone(kept))
	return "", nil
}

// extraCharge picks the newest succeeded charge of the order that the order does not keep,
// from its charges in the ledger (oldest first). The order keeps the charge recorded on its
// succeeded payment. Without one, a charge that could still be a live payment's outcome (one
// for the amount of a pending payment, or of a paid order whose own charge is not succeeded)
// is not extra either: check it first. Everything else succeeded is money taken too much.
func extraCharge(order *models.Order, charges []GatewayCharge) (extra *GatewayCharge, kept string) {
	var pending *models.Payment
	for i := range order.Payments {
		p := &order.Payments[i]
		if p.Status == models.PaymentSucceeded && p.GatewayChargeID != nil {
			kept = *p.GatewayChargeID
		}
		if p.Status == models.PaymentPending {
			pending = p
		}
	}
	keptSucceeded := false
	for _, c := range charges {
		keptSucceeded = keptSucceeded || c.ID == kept && c.Status == "succeeded"
	}
	mayBeKept := func(c GatewayCharge) bool {
		return pending != nil && chargeFits(pending, c) ||
			order.Status == models.OrderPaid && c.Amount == order.Amount && c.Currency == order.Currency
	}
	for i := len(charges) - 1; i >= 0; i-- {
		c := charges[i]
		if c.Status != "succeeded" || c.ID == kept || !keptSucceeded && mayBeKept(c) {
			continue
		}
		return &c, kept
	}
	return nil, kept
}

// settleStuck settles the order's pending payment: SettleResume resumes its operation now,
// through the completer's path (ask the gateway, charge only if nothing is there, record the
// outcome and store the answer); SettleFailed, only if the gateway shows nothing under the
// payment's key that could be its outcome or money taken, marks it failed, gives the order's
// stock back and stores the decline as the key's answer. Either way the desk first takes the
// key over, so no retry or completer works on the payment at the same time.
func (t *Triage) settleStuck(ctx context.Context, order *models.Order, charges []GatewayCharge, d *models.Decision, req ActionRequest) (string, error) {
	pay := currentPayment(order)
	if pay == nil || pay.Status != models.PaymentPending {
		return "", notAllowed("order %s has no pending payment to settle", order.ID)
	}
	ck, err := t.Keys.ClaimPaymentKey(ctx, order.TenantID, pay.ID, t.Lease)
	switch {
	case errors.Is(err, models.ErrKeyBusy):
		return "", notAllowed("a request is working on payment %s right now; let it finish", pay.ID)
	case errors.Is(err, models.ErrNotFound):
		if req.Outcome == SettleResume {
			return "", notAllowed("payment %s has no operation in progress to resume", pay.ID)
		}
	case err != nil:
		return "", err
	}
	release := func() {
		if ck == nil {
			return
		}
		if err := ck.Key.Release(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, models.ErrLeaseLost) {
			t.log().WarnContext(ctx, "triage: release key", "payment_id", pay.ID, "err", err)
		}
	}
	underKey, err := t.Gateway.FindCharges(ctx, pay.GatewayKey)
	if err != nil {
		release()
		return "", gatewayUnavailable(err)
	}
	d.Gateway = "under the payment's key: " + describeCharges(underKey)

	if req.Outcome == SettleResume {
		if _, err := t.Service.charge(ctx, ck.Key, t.Endpoints[ck.Endpoint], true, nil); err != nil {
			if !errors.Is(err, models.ErrLeaseLost) {
				release()
			}
			d.Result, d.Detail = ResultUnresolved, "resumed, but the outcome is still not known ("+errorCode(err)+"); the key is released for a retry or the completer"
			return pay.ID, nil
		}
		after, err := models.NewPaymentStore(t.DB).Get(ctx, pay.ID)
		if err != nil {
			return "", err
		}
		d.Result, d.Detail = ResultResumed, fmt.Sprintf("resumed through the completer's path: payment %s is %s, its answer stored with the key", pay.ID, after.Status)
		return pay.ID, nil
	}

	// Settle as failed: refused while the gateway shows anything that may be this payment's
	// outcome (a charge for its amount, whatever its status) or money taken (a succeeded
	// charge of any amount, under its key or naming it).
	for _, c := range append(underKey, charges...) {
		if c.IdempotencyKey != pay.GatewayKey && c.Metadata["payment_id"] != pay.ID {
			continue
		}
		if chargeFits(pay, c) || c.Status == "succeeded" {
			release()
			return "", notAllowed("the gateway shows charge %s (%s, %d %s) for payment %s: resume it instead, or refund it first",
				c.ID, c.Status, c.Amount, c.Currency, pay.ID)
		}
	}
	err = t.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		tr, err := models.SettlePaymentTx(tx, pay.ID, models.PaymentFailed, "", declineAbandoned)
		if err != nil {
			return err
		}
		if !tr.Moved {
			return notAllowed("payment %s is no longer pending: it is %s", pay.ID, tr.Payment.Status)
		}
		released, err := models.ExpireOrderTx(tx, order.ID)
		if err != nil {
			return err
		}
		if ck != nil {
			resp, err := t.Service.Render(Result{Operation: t.Endpoints[ck.Endpoint], Order: tr.Order, Payment: tr.Payment, Err: Declined(declineAbandoned)})
			if err != nil {
				return fmt.Errorf("render outcome: %w", err)
			}
			if err := ck.Key.CompleteTx(tx, resp); err != nil {
				return err
			}
		}
		d.Result = ResultFailed
		d.Detail = fmt.Sprintf("payment %s marked failed (nothing charged under its key), order %s expired", pay.ID, tr.Order.ID)
		if released {
			d.Detail += ", its stock given back"
		}
		if ck != nil {
			d.Detail += "; a retry of its key gets the decline"
		}
		return t.decideTx(tx, d, pay.ID)
	})
	if err != nil {
		release()
		return "", err
	}
	return pay.ID, nil
}

// dismissDuplicate records that the order is a real purchase of its own, not a duplicate of
// another: reconciliation stops suspecting it.
func (t *Triage) dismissDuplicate(_ context.Context, order *models.Order, _ []GatewayCharge, d *models.Decision, _ ActionRequest) (string, error) {
	d.Gateway = "not asked: a suspected duplicate is about the shop's orders"
	d.Result, d.Detail = models.ResultDismissed, "order "+order.ID+" is a real purchase of its own; it leaves the suspected duplicates"
	return "", nil
}

// currentPayment is the order's pending payment if it has one, else its latest.
func currentPayment(o *models.Order) *models.Payment {
	for i := range o.Payments {
		if o.Payments[i].Status == models.PaymentPending {
			return &o.Payments[i]
		}
	}
	if len(o.Payments) == 0 {
		return nil
	}
	return &o.Payments[len(o.Payments)-1]
}

// describeCharges words what the gateway showed, for the decision.
func describeCharges(cs []GatewayCharge) string {
	if len(cs) == 0 {
		return "no charge"
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%s %s %d %s", c.ID, c.Status, c.Amount, c.Currency)
	}
	return strings.Join(parts, "; ")
}

func gatewayUnavailable(err error) *models.Error {
	return models.ErrGatewayUnavailable.Msgf("the gateway could not be asked; nothing was done, try again").Wrap(err)
}

func anyOf(have, want []string) bool {
	for _, h := range have {
		for _, w := range want {
			if h == w {
				return true
			}
		}
	}
	return false
}

func listOrNone(list []string) string {
	if len(list) == 0 || len(list) == 1 && list[0] == "" {
		return "nothing"
	}
	return strings.Join(list, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func (t *Triage) log() *slog.Logger {
	if t.Logger != nil {
		return t.Logger
	}
	return slog.Default()
}
