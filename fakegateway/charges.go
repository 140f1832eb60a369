package fakegateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ChargeRequest is the body of POST /v1/charges. Give either PaymentMethod or CardNumber.
type ChargeRequest struct {
	Amount        *int64            `json:"amount"`
	Currency      string            `json:"currency"`
	PaymentMethod string            `json:"payment_method,omitempty"`
	CardNumber    string            `json:"card_number,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
}

const maxAmount = 99_999_999 // as Stripe: eight digits of minor units

// validCharge is a charge request that passed validation, with its payment source resolved.
type validCharge struct {
	key         string
	amount      int64
	currency    string
	metadata    map[string]string
	pm          *paymentMethodRow // an existing payment method, or nil when paying by card
	card        *card             // the card, or nil when paying with a payment method
	behaviour   string
	fingerprint string
}

// chargeOutcome is what the commit phase decided, for the answer phase.
type chargeOutcome struct {
	charge   chargeRow
	status   int  // 201 or 402
	replayed bool // an earlier request under the same key made this charge
}

// idempotencyKey reads and checks the Idempotency-Key header: required, 1 to 255 characters.
func idempotencyKey(c echo.Context) (string, error) {
	values, ok := c.Request().Header[http.CanonicalHeaderKey("Idempotency-Key")]
	if !ok {
		return "", badRequest("idempotency_key_required", "the Idempotency-Key header is required")
	}
	key := strings.TrimSpace(values[0])
	if key == "" || len(key) > 255 {
		return "", badRequest("invalid_idempotency_key", "the Idempotency-Key must be 1 to 255 characters")
	}
	return key, nil
}

// validateCharge checks every field and resolves the payment source. It returns a 400 and
// writes nothing when anything is wrong.
func (g *Gateway) validateCharge(ctx context.Context, key string, req ChargeRequest) (validCharge, error) {
	v := validCharge{key: key, metadata: req.Metadata}
	switch {
	case req.Amount == nil:
		return v, invalid("amount is required")
	case *req.Amount <= 0:
		return v, invalid("amount must be a positive integer in minor units")
	case *req.Amount > maxAmount:
		return v, invalid("amount must be at most %d", maxAmount)
	}
	v.amount = *req.Amount
	v.currency = strings.ToUpper(strings.TrimSpace(req.Currency))
	if v.currency == "" {
		return v, invalid("currency is required")
	}
	if !currencies[v.currency] {
		return v, invalid("currency %q is not supported", req.Currency)
	}
	if len(req.Metadata) > 50 {
		return v, invalid("metadata may have at most 50 keys")
	}
	for k, val := range req.Metadata {
		if k == "" || len(k) > 40 || len(val) > 500 {
			return v, invalid("metadata keys must be 1 to 40 characters and values at most 500")
		}
	}
	if v.metadata == nil {
		v.metadata = map[string]string{}
	}
	var source string
	switch {
	case req.PaymentMethod != "" && req.CardNumber != "":
		return v, invalid("give either payment_method or card_number, not both")
	case req.PaymentMethod != "":
		var pm paymentMethodRow
		err := g.db.WithContext(ctx).Where("id = ?", req.PaymentMethod).Take(&pm).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return v, badRequest("resource_missing", "no such payment method %q", req.PaymentMethod)
		}
		if err != nil {
			return v, fmt.Errorf("load payment method: %w", err)
		}
		v.pm, v.behaviour, source = &pm, pm.Behaviour, "pm:"+pm.ID
	case req.CardNumber != "":
		cd, err := parseCard(req.CardNumber)
		if err != nil {
			return v, err
		}
		v.card, v.behaviour, source = &cd, cd.behaviour, "card:"+cd.number
	default:
		return v, invalid("payment_method or card_number is required")
	}
	// The fingerprint keeps only a hash, so the card number never reaches the database.
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d|%s|%s", v.amount, v.currency, source)))
	v.fingerprint = hex.EncodeToString(sum[:])
	return v, nil
}

// createCharge handles POST /v1/charges. The phases are, in order: validate (400, nothing
// written); faults that strike before the commit; one transaction that claims the key and
// writes the charge, its events and their deliveries; faults that strike after the commit; the
// answer (201, or 402 for a decline; a replay answers the stored status).
func (g *Gateway) createCharge(c echo.Context) error {
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	var req ChargeRequest
	if err := readJSON(c, &req); err != nil {
		return err
	}
	// Once the request has arrived the gateway finishes its work even if the client hangs up,
	// as a real provider does: that is exactly what makes a lost response dangerous.
	reqCtx := c.Request().Context()
	ctx := context.WithoutCancel(reqCtx)
	v, err := g.validateCharge(ctx, key, req)
	if err != nil {
		return err
	}
	log := g.log.With("idempotency_key", key, "amount", v.amount, "currency", v.currency)

	ignoreKey, err := g.takeFault(ctx, g.db, faultIgnoreIdempotencyKey)
	if err != nil {
		return err
	}
	latency, err := g.takeFault(ctx, g.db, faultLatency)
	if err != nil {
		return err
	}
	if latency != nil {
		g.sleep(reqCtx, time.Duration(latency.DelayMS)*time.Millisecond)
	}
	outcome, err := g.takeFault(ctx, g.db, outcomeFaults...)
	if err != nil {
		return err
	}
	if outcome == nil && v.behaviour == faultErrorBeforeCommit {
		if outcome, err = g.cardStrike(ctx, key, v.behaviour, ignoreKey != nil); err != nil {
			return err
		}
	}

	// Before the commit: nothing is written to the ledger.
	if outcome != nil && (outcome.Fault == faultErrorBeforeCommit || outcome.Fault == faultTimeoutBeforeCommit) {
		if err := g.recordHits(ctx, g.db, "", key, ignoreKey, latency, outcome); err != nil {
			return err
		}
		switch outcome.Fault {
		case faultErrorBeforeCommit:
			log.InfoContext(ctx, "fault: error before commit, nothing charged", "status", outcome.Status)
			return c.JSON(outcome.Status, errorBody{Error: "service_unavailable",
				Message: "the gateway could not process the request; nothing was charged"})
		case faultTimeoutBeforeCommit:
			log.InfoContext(ctx, "fault: hang before commit, nothing charged", "delay_ms", outcome.DelayMS)
			g.sleep(reqCtx, time.Duration(outcome.DelayMS)*time.Millisecond)
			if err := dropConnection(c); err != nil {
				log.WarnContext(ctx, "drop connection", "err", err)
			}
			return nil
		}
	}

	res, err := g.commitCharge(ctx, v, ignoreKey != nil)
	if err != nil {
		return err
	}
	g.nudge(res.charge.ID)
	log = log.With("charge_id", res.charge.ID, "status", res.charge.Status, "replayed", res.replayed)
	log.InfoContext(ctx, "charge committed or replayed")

	// After the commit: the charge exists whatever the client sees now.
	after, struck := "", outcome
	if outcome != nil {
		after = outcome.Fault
	} else if !res.replayed && (v.behaviour == faultCommitThenDrop || v.behaviour == faultCommitThenDelay) {
		// A test card's fault strikes on the first charge under a key only.
		after, struck = v.behaviour, cardFault(v.behaviour)
	}
	if err := g.recordHits(ctx, g.db, res.charge.ID, key, ignoreKey, latency, struck); err != nil {
		return err
	}
	switch after {
	case faultCommitThenDrop:
		log.InfoContext(ctx, "fault: committed, dropping the connection")
		if err := dropConnection(c); err != nil {
			log.WarnContext(ctx, "drop connection", "err", err)
		}
		return nil
	case faultCommitThenDelay:
		delay := DefaultFaultDelay
		if outcome != nil {
			delay = time.Duration(outcome.DelayMS) * time.Millisecond
		}
		log.InfoContext(ctx, "fault: committed, answering late", "delay", delay)
		g.sleep(reqCtx, delay)
	case faultCommitThenError:
		log.InfoContext(ctx, "fault: committed, answering an error", "status", outcome.Status)
		return c.JSON(outcome.Status, errorBody{Error: "internal_error",
			Message: "the gateway failed while answering; the charge may or may not exist"})
	}
	if res.replayed {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	}
	return c.JSON(res.status, res.charge.view())
}

// cardStrike records that a test card's before-commit fault struck under key. It returns the
// fault to apply, or nil when it already struck under this key (a retry then goes through, as
// after a transient error). With ignoreKey every call counts as a first call.
func (g *Gateway) cardStrike(ctx context.Context, key, behaviour string, ignoreKey bool) (*faultRow, error) {
	fault := cardFault(behaviour)
	fault.Status = http.StatusServiceUnavailable
	if ignoreKey {
		return fault, nil
	}
	res := g.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).
		Create(&faultStrikeRow{IdempotencyKey: key, Behaviour: behaviour, CreatedAt: g.now()})
	if res.Error != nil {
		return nil, fmt.Errorf("record card fault: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return nil, nil
	}
	return fault, nil
}

// commitCharge is the one transaction of a charge. It claims the idempotency key with
// INSERT … ON CONFLICT DO NOTHING; if another request holds the key it returns that request's
// charge (or a 409 idempotency_key_reuse when the parameters differ). Otherwise it writes the
// payment method (when paying by card), the charge, its events and their deliveries. With
// ignoreKey the key is not claimed and every call makes a new charge.
func (g *Gateway) commitCharge(ctx context.Context, v validCharge, ignoreKey bool) (chargeOutcome, error) {
	var out chargeOutcome
	err := g.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		now := g.now()
		chargeID := newID("ch")
		if !ignoreKey {
			claim := idempotencyKeyRow{Key: v.key, Fingerprint: v.fingerprint, ChargeID: chargeID,
				StatusCode: http.StatusCreated, CreatedAt: now}
			res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&claim)
			if res.Error != nil {
				return fmt.Errorf("claim idempotency key: %w", res.Error)
			}
			if res.RowsAffected == 0 {
				return g.replay(tx, v, &out)
			}
		}
		pmID := ""
		if v.pm != nil {
			pmID = v.pm.ID
		} else {
			pm := paymentMethodRow{ID: newID("pm"), Last4: v.card.last4, Brand: v.card.brand,
				Behaviour: v.card.behaviour, CreatedAt: now}
			if err := tx.Create(&pm).Error; err != nil {
				return fmt.Errorf("create payment method: %w", err)
			}
			pmID = pm.ID
		}
		metadata, _ := json.Marshal(v.metadata) // a map[string]string always marshals
		ch := chargeRow{ID: chargeID, IdempotencyKey: v.key, Amount: v.amount, Currency: v.currency,
			Status: statusSucceeded, PaymentMethodID: pmID, Metadata: string(metadata),
			OrderID: v.metadata["order_id"], CreatedAt: now}
		switch v.behaviour {
		case behaviourCardDeclined, behaviourInsufficientFunds:
			ch.Status, ch.FailureCode = statusFailed, v.behaviour
		}
		var declined *faultRow
		if ch.Status == statusSucceeded {
			var err error
			if declined, err = g.takeFault(ctx, tx, faultDecline); err != nil {
				return err
			}
			if declined != nil {
				ch.Status, ch.FailureCode = statusFailed, declined.Code
			}
		}
		if err := tx.Create(&ch).Error; err != nil {
			return fmt.Errorf("create charge: %w", err)
		}
		out = chargeOutcome{charge: ch, status: http.StatusCreated}
		if ch.Status == statusFailed {
			out.status = http.StatusPaymentRequired
			if !ignoreKey {
				if err := tx.Model(&idempotencyKeyRow{}).Where("key = ?", v.key).
					Update("status_code", out.status).Error; err != nil {
					return fmt.Errorf("store decline status: %w", err)
				}
			}
		}
		plan, err := g.deliveryPlan(ctx, tx, v.behaviour)
		if err != nil {
			return err
		}
		if err := g.recordHits(ctx, tx, ch.ID, v.key, append(plan.struck, declined)...); err != nil {
			return err
		}
		final := "charge.succeeded"
		if ch.Status == statusFailed {
			final = "charge.failed"
		}
		return g.enqueueEvents(tx, ch, []string{"charge.pending", final}, plan)
	})
	if err != nil {
		return chargeOutcome{}, err
	}
	return out, nil
}

// replay fills out with the charge stored under v.key, or returns idempotency_key_reuse (409)
// if the stored request had other parameters.
func (g *Gateway) replay(tx *gorm.DB, v validCharge, out *chargeOutcome) error {
	var stored idempotencyKeyRow
	if err := tx.Where("key = ?", v.key).Take(&stored).Error; err != nil {
		return fmt.Errorf("load idempotency key: %w", err)
	}
	if stored.Fingerprint != v.fingerprint {
		return &apiError{Status: http.StatusConflict, Code: "idempotency_key_reuse",
			Message: "this Idempotency-Key was used with other parameters (amount, currency or payment method)"}
	}
	var ch chargeRow
	if err := tx.Where("id = ?", stored.ChargeID).Take(&ch).Error; err != nil {
		return fmt.Errorf("load replayed charge: %w", err)
	}
	*out = chargeOutcome{charge: ch, status: stored.StatusCode, replayed: true}
	return nil
}

// getCharge handles GET /v1/charges/:id.
func (g *Gateway) getCharge(c echo.Context) error {
	ch, err := g.loadCharge(c.Request().Context(), g.db, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ch.view())
}

func (g *Gateway) loadCharge(ctx context.Context, db *gorm.DB, id string) (chargeRow, error) {
	var ch chargeRow
	err := db.WithContext(ctx).Where("id = ?", id).Take(&ch).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return ch, notFound("no such charge %q", id)
	}
	if err != nil {
		return ch, fmt.Errorf("load charge: %w", err)
	}
	return ch, nil
}

// ChargeList is the body of GET /v1/charges and GET /_control/ledger.
type ChargeList struct {
	Data []Charge `json:"data"`
}

// listCharges handles GET /v1/charges?idempotency_key=K: every charge made under K, oldest
// first. More than one means the ignore_idempotency_key fault was armed.
func (g *Gateway) listCharges(c echo.Context) error {
	key := c.QueryParam("idempotency_key")
	if key == "" {
		return invalid("the idempotency_key query parameter is required")
	}
	var rows []chargeRow
	if err := g.db.WithContext(c.Request().Context()).Where("idempotency_key = ?", key).
		Order("created_at, id").Find(&rows).Error; err != nil {
		return fmt.Errorf("list charges: %w", err)
	}
	return c.JSON(http.StatusOK, ChargeList{Data: views(rows)})
}

func views(rows []chargeRow) []Charge {
	out := make([]Charge, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.view())
	}
	return out
}

// refundCharge handles POST /v1/charges/:id/refunds: a full refund of a succeeded charge,
// with a charge.refunded event in the same transaction. A conditional UPDATE makes a second
// refund answer 400 charge_already_refunded instead of refunding twice.
func (g *Gateway) refundCharge(c echo.Context) error {
	ctx := context.WithoutCancel(c.Request().Context())
	id := c.Param("id")
	var ch chargeRow
	err := g.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if ch, err = g.loadCharge(ctx, tx, id); err != nil {
			return err
		}
		now := g.now()
		res := tx.Model(&chargeRow{}).Where("id = ? AND status = ?", id, statusSucceeded).
			Updates(map[string]any{"status": statusRefunded, "refunded_at": now})
		if res.Error != nil {
			return fmt.Errorf("refund charge: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			if ch.Status == statusRefunded {
				return badRequest("charge_already_refunded", "charge %s is already refunded", id)
			}
			return badRequest("charge_not_refundable", "charge %s did not succeed, so it cannot be refunded", id)
		}
		ch.Status, ch.RefundedAt = statusRefunded, &now
		return g.enqueueEvents(tx, ch, []string{"charge.refunded"}, deliveryPlan{copies: 1})
	})
	if err != nil {
		return err
	}
	g.nudge(id)
	g.log.InfoContext(ctx, "charge refunded", "charge_id", id)
	return c.JSON(http.StatusOK, ch.view())
}
