package fakegateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"gorm.io/gorm"
)

// Delivery statuses.
const (
	deliveryPending   = "pending"
	deliveryDelivered = "delivered"
	deliveryFailed    = "failed"
)

// deliveryPlan is how the events of one charge change are delivered: normally once each, in
// order, now; webhook faults change that.
type deliveryPlan struct {
	copies  int
	reverse bool
	delay   time.Duration
	struck  []*faultRow // the faults that made it so, for the page's history
}

// deliveryPlan takes the webhook faults that apply to a new charge: armed ones, and the test
// card's own (webhook_duplicate, webhook_reorder). tx is the charge's transaction, so a fault
// is only used up by a charge that really commits.
func (g *Gateway) deliveryPlan(ctx context.Context, tx *gorm.DB, behaviour string) (deliveryPlan, error) {
	plan := deliveryPlan{copies: 1}
	switch behaviour {
	case faultWebhookDuplicate:
		plan.copies = 3
		plan.struck = append(plan.struck, cardFault(behaviour))
	case faultWebhookReorder:
		plan.reverse = true
		plan.struck = append(plan.struck, cardFault(behaviour))
	}
	if f, err := g.takeFault(ctx, tx, faultWebhookDuplicate); err != nil {
		return plan, err
	} else if f != nil {
		plan.copies = f.Copies
		plan.struck = append(plan.struck, f)
	}
	if f, err := g.takeFault(ctx, tx, faultWebhookReorder); err != nil {
		return plan, err
	} else if f != nil {
		plan.reverse = true
		plan.struck = append(plan.struck, f)
	}
	if f, err := g.takeFault(ctx, tx, faultWebhookDelay); err != nil {
		return plan, err
	} else if f != nil {
		plan.delay = time.Duration(f.DelayMS) * time.Millisecond
		plan.struck = append(plan.struck, f)
	}
	return plan, nil
}

// enqueueEvents writes one event per type for ch, and its deliveries, in tx: the outbox. The
// event body is frozen now (charge.pending shows the charge as pending), so every attempt and
// every resend sends the same bytes under the same webhook-id.
func (g *Gateway) enqueueEvents(tx *gorm.DB, ch chargeRow, types []string, plan deliveryPlan) error {
	now := g.now()
	for i, typ := range types {
		snapshot := ch.view()
		if typ == "charge.pending" {
			snapshot.Status, snapshot.FailureCode = statusPending, ""
		}
		ev := Event{ID: newID("evt"), Type: typ, Created: now.Unix(), Data: EventData{Charge: snapshot}}
		payload, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("encode event: %w", err)
		}
		if err := tx.Create(&eventRow{ID: ev.ID, Type: typ, ChargeID: ch.ID, Payload: string(payload), CreatedAt: now,
			Traceparent: traceparentOf(tx.Statement.Context)}).Error; err != nil { // its deliveries continue this trace
			return fmt.Errorf("store event: %w", err)
		}
		// The sender sends due deliveries in (next_attempt_at, id) order; a millisecond per
		// position fixes the order, reversed for webhook_reorder.
		pos := i
		if plan.reverse {
			pos = len(types) - 1 - i
		}
		due := now.Add(plan.delay + time.Duration(pos)*time.Millisecond)
		for copyNo := 0; copyNo < max(plan.copies, 1); copyNo++ {
			reason := "original"
			if copyNo > 0 {
				reason = "duplicate"
			}
			d := deliveryRow{EventID: ev.ID, Reason: reason, Status: deliveryPending, NextAttemptAt: due, CreatedAt: now}
			if err := tx.Create(&d).Error; err != nil {
				return fmt.Errorf("store delivery: %w", err)
			}
		}
	}
	return nil
}

// resendEvent queues one more delivery of an existing event, like `stripe events resend`: the
// same body and webhook-id, so the receiver sees a true duplicate. It returns a 404 for an
// unknown event.
func (g *Gateway) resendEvent(ctx context.Context, eventID string) (Delivery, error) {
	var ev eventRow
	err := g.db.WithContext(ctx).Where("id = ?", eventID).Take(&ev).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Delivery{}, notFound("no such event %q", eventID)
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("load event: %w", err)
	}
	now := g.now()
	d := deliveryRow{EventID: ev.ID, Reason: "resend", Status: deliveryPending, NextAttemptAt: now, CreatedAt: now}
	if err := g.db.WithContext(ctx).Create(&d).Error; err != nil {
		return Delivery{}, fmt.Errorf("queue resend: %w", err)
	}
	g.nudge()
	g.log.InfoContext(ctx, "event resend queued", "event_id", ev.ID, "delivery_id", d.ID)
	return d.view(ev, nil), nil
}

// runSender delivers due webhooks until ctx ends. Deliveries are sent one at a time, oldest
// due first, which keeps the order of events meaningful (and webhook_reorder visible).
func (g *Gateway) runSender(ctx context.Context) {
	if g.cfg.WebhookURL == "" {
		g.log.Warn("no webhook URL configured: events are recorded but not sent")
	}
	g.log.Info("webhook sender started", "url", g.cfg.WebhookURL)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			g.log.Info("webhook sender stopped")
			return
		case <-timer.C:
		case <-g.wake:
		}
		if g.cfg.WebhookURL != "" {
			if err := g.deliverDue(ctx); err != nil && ctx.Err() == nil {
				g.log.Error("deliver webhooks", "err", err)
			}
		}
		timer.Reset(g.cfg.PollInterval)
	}
}

// deliverDue sends every delivery that is due, batch by batch, until none is left.
func (g *Gateway) deliverDue(ctx context.Context) error {
	for ctx.Err() == nil {
		var due []deliveryRow
		if err := g.db.WithContext(ctx).Where("status = ? AND next_attempt_at <= ?", deliveryPending, g.now()).
			Order("next_attempt_at, id").Limit(20).Find(&due).Error; err != nil {
			return fmt.Errorf("load due deliveries: %w", err)
		}
		if len(due) == 0 {
			return nil
		}
		ids := make([]string, 0, len(due))
		for _, d := range due {
			ids = append(ids, d.EventID)
		}
		var events []eventRow
		if err := g.db.WithContext(ctx).Where("id IN ?", ids).Find(&events).Error; err != nil {
			return fmt.Errorf("load events: %w", err)
		}
		byID := make(map[string]eventRow, len(events))
		for _, e := range events {
			byID[e.ID] = e
		}
		for _, d := range due {
			if err := g.attempt(ctx, d, byID[d.EventID]); err != nil {
				return err
			}
		}
	}
	return nil
}

// attempt makes one delivery attempt and records it. A 2xx marks the delivery delivered;
// anything else schedules the next attempt after the backoff, or marks it failed once
// MaxAttempts is reached. The webhook_fail fault fails an attempt without sending it, as if the
// receiver were down.
func (g *Gateway) attempt(ctx context.Context, d deliveryRow, ev eventRow) error {
	n := d.Attempts + 1
	start := time.Now()
	var status int
	var sendErr error
	f, err := g.takeFault(ctx, g.db, faultWebhookFail)
	if err != nil {
		return err
	}
	if f != nil {
		sendErr = errors.New("webhook_fail fault: the attempt failed before reaching the receiver")
		if err := g.recordHits(ctx, g.db, ev.ChargeID, "", f); err != nil {
			return err
		}
	} else {
		status, sendErr = g.sendTraced(ctx, ev)
	}
	if ctx.Err() != nil {
		return nil // shutting down: the delivery stays pending and the next process resumes it
	}
	latency := time.Since(start)
	now := g.now()
	a := attemptRow{DeliveryID: d.ID, Attempt: n, StatusCode: status, LatencyMS: latency.Milliseconds(), CreatedAt: now}
	upd := map[string]any{"attempts": n}
	log := g.log.With("event_id", ev.ID, "type", ev.Type, "delivery_id", d.ID, "attempt", n, "latency_ms", a.LatencyMS)
	switch {
	case sendErr == nil && status >= 200 && status < 300:
		upd["status"], upd["delivered_at"], upd["last_error"] = deliveryDelivered, now, ""
		log.Info("webhook delivered", "status", status)
	default:
		if sendErr != nil {
			a.Error = sendErr.Error()
		} else {
			a.Error = fmt.Sprintf("receiver answered %d", status)
		}
		upd["last_error"] = a.Error
		if n >= g.cfg.MaxAttempts {
			upd["status"] = deliveryFailed
			log.Warn("webhook delivery gave up", "status", status, "err", a.Error)
		} else {
			next := g.backoff(n)
			upd["next_attempt_at"] = now.Add(next)
			log.Info("webhook attempt failed, will retry", "status", status, "err", a.Error, "retry_in", next)
		}
	}
	err = g.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&a).Error; err != nil {
			return fmt.Errorf("record attempt: %w", err)
		}
		if err := tx.Model(&deliveryRow{}).Where("id = ?", d.ID).Updates(upd).Error; err != nil {
			return fmt.Errorf("update delivery: %w", err)
		}
		return nil
	})
	if err != nil && ctx.Err() != nil {
		return nil
	}
	return err
}

// backoff is the wait after the n-th failed attempt: RetryBase doubled per attempt, capped.
func (g *Gateway) backoff(n int) time.Duration {
	d := g.cfg.RetryBase
	for i := 1; i < n && d < g.cfg.RetryMax; i++ {
		d *= 2
	}
	return min(d, g.cfg.RetryMax)
}

// send POSTs the event, signed for this attempt: webhook-id is the event id on every attempt,
// webhook-timestamp is now. It returns the receiver's status, or an error if there was none.
func (g *Gateway) send(ctx context.Context, ev eventRow) (int, error) {
	ts := time.Now()
	sig, err := g.signer.Sign(ev.ID, ts, []byte(ev.Payload))
	if err != nil {
		return 0, fmt.Errorf("sign event: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.cfg.WebhookURL, bytes.NewReader([]byte(ev.Payload)))
	if err != nil {
		return 0, fmt.Errorf("build webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "checkoutlab-fakegateway")
	req.Header.Set(standardwebhooks.HeaderWebhookID, ev.ID)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	injectTrace(ctx, req.Header) // the receiver continues the charge's trace
	resp, err := g.httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// Delivery is one webhook delivery with its attempts, as the control API shows it.
type Delivery struct {
	ID            int64     `json:"id"`
	EventID       string    `json:"event_id"`
	EventType     string    `json:"event_type"`
	ChargeID      string    `json:"charge_id"`
	Reason        string    `json:"reason"`
	Status        string    `json:"status"`
	Attempts      []Attempt `json:"attempts"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
	LastError     string    `json:"last_error,omitempty"`
	Created       time.Time `json:"created_at"`
}

// Attempt is one try at a delivery.
type Attempt struct {
	Attempt    int       `json:"attempt"`
	StatusCode int       `json:"status_code"`
	LatencyMS  int64     `json:"latency_ms"`
	Error      string    `json:"error,omitempty"`
	At         time.Time `json:"at"`
}

func (d deliveryRow) view(ev eventRow, attempts []attemptRow) Delivery {
	out := Delivery{ID: d.ID, EventID: d.EventID, EventType: ev.Type, ChargeID: ev.ChargeID, Reason: d.Reason,
		Status: d.Status, NextAttemptAt: d.NextAttemptAt, LastError: d.LastError, Created: d.CreatedAt,
		Attempts: []Attempt{}}
	for _, a := range attempts {
		out.Attempts = append(out.Attempts, Attempt{Attempt: a.Attempt, StatusCode: a.StatusCode,
			LatencyMS: a.LatencyMS, Error: a.Error, At: a.CreatedAt})
	}
	return out
}

// deliveries lists the newest limit deliveries with their attempts, newest first.
func (g *Gateway) deliveries(ctx context.Context, limit int) ([]Delivery, error) {
	db := g.db.WithContext(ctx)
	var rows []deliveryRow
	if err := db.Order("id DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	if len(rows) == 0 {
		return []Delivery{}, nil
	}
	eventIDs := make([]string, 0, len(rows))
	deliveryIDs := make([]int64, 0, len(rows))
	for _, r := range rows {
		eventIDs = append(eventIDs, r.EventID)
		deliveryIDs = append(deliveryIDs, r.ID)
	}
	var events []eventRow
	if err := db.Where("id IN ?", eventIDs).Find(&events).Error; err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	var attempts []attemptRow
	if err := db.Where("delivery_id IN ?", deliveryIDs).Order("delivery_id, attempt").Find(&attempts).Error; err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	evByID := map[string]eventRow{}
	for _, e := range events {
		evByID[e.ID] = e
	}
	attByDelivery := map[int64][]attemptRow{}
	for _, a := range attempts {
		attByDelivery[a.DeliveryID] = append(attByDelivery[a.DeliveryID], a)
	}
	out := make([]Delivery, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.view(evByID[r.EventID], attByDelivery[r.ID]))
	}
	return out, nil
}
