package fakegateway

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
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
		// The sender of the charge's lane sends its due deliveries in (next_attempt_at, id)
		// order; a millisecond per position fixes the order, reversed for webhook_reorder.
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
			d := deliveryRow{EventID: ev.ID, Reason: reason, Status: deliveryPending, NextAttemptAt: due, CreatedAt: now,
				Lane: laneOf(ch.ID)}
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
	d := deliveryRow{EventID: ev.ID, Reason: "resend", Status: deliveryPending, NextAttemptAt: now, CreatedAt: now,
		Lane: laneOf(ev.ChargeID)}
	if err := g.db.WithContext(ctx).Create(&d).Error; err != nil {
		return Delivery{}, fmt.Errorf("queue resend: %w", err)
	}
	g.nudge(ev.ChargeID)
	g.log.InfoContext(ctx, "event resend queued", "event_id", ev.ID, "delivery_id", d.ID)
	return d.view(ev, nil), nil
}

// The senders. Deliveries are sent by Config.Senders goroutines at once, so one slow or busy
// receiver answer does not hold up every other webhook. Two rules keep the faults meaningful:
//
//   - Every delivery of one charge is sent by the same sender, one after the other, oldest due
//     first, exactly as a single sender would: charge.pending before charge.succeeded, and the
//     reverse when webhook_reorder made them fall due the other way round. A delivery's lane
//     (laneOf its charge) says which sender: lane % Senders.
//   - A sender claims the deliveries it is about to send in one UPDATE … RETURNING that sets
//     claimed_by and claimed_until, so no other sender — of this process or of another
//     gateway process on the same database — takes them as well. On PostgreSQL the UPDATE's
//     subquery locks the rows it picks FOR UPDATE SKIP LOCKED: two claims running at the
//     same moment pick different rows instead of waiting for each other. SQLite has one
//     writer at a time, so the same UPDATE is atomic there without it.
//
// A claim is a lease rather than a flag: if the process dies with deliveries claimed, they
// are taken again once claimed_until has passed (claimLease), as a real provider retries a
// delivery it never heard back about. A sender that stops cleanly gives its claims back.

// laneCount is how many lanes there are. Any number larger than the senders works; lanes are
// fixed when a delivery is written, so the number of senders may change between starts.
const laneCount = 1024

// claimBatch is how many due deliveries of its lanes a sender claims at once.
const claimBatch = 8

// laneOf is the lane of every delivery of the charge chargeID.
func laneOf(chargeID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(chargeID)) // a hash never fails to write
	return int(h.Sum32() % laneCount)
}

// claimLease is how long a claim holds: long enough to send a whole batch, each attempt
// bounded by DeliveryTimeout, with a margin for the database. Only a dead process's claims
// ever run out; a sender records every attempt well within it.
func (g *Gateway) claimLease() time.Duration {
	return claimBatch*g.cfg.DeliveryTimeout + 10*time.Second
}

// runSenders runs the senders until ctx ends, then gives back the claims this process still
// holds (an attempt cut short by the shutdown), so the next process need not wait for their
// lease to run out.
func (g *Gateway) runSenders(ctx context.Context) {
	if g.cfg.WebhookURL == "" {
		g.log.Warn("no webhook URL configured: events are recorded but not sent")
		<-ctx.Done()
		return
	}
	g.log.Info("webhook senders started", "url", g.cfg.WebhookURL, "senders", g.cfg.Senders)
	var wg sync.WaitGroup
	for n := range g.cfg.Senders {
		wg.Add(1)
		go func() { defer wg.Done(); g.runSender(ctx, n) }()
	}
	g.runPoller(ctx)
	wg.Wait()
	g.releaseClaims()
	g.log.Info("webhook senders stopped")
}

// runSender is sender n: whenever it is woken (nudge, runPoller), it delivers the due
// webhooks of its lanes, until ctx ends.
func (g *Gateway) runSender(ctx context.Context, n int) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.wake[n]:
		}
		if err := g.deliverDue(ctx, n); err != nil && ctx.Err() == nil {
			g.log.Error("deliver webhooks", "sender", n, "err", err)
		}
	}
}

// runPoller looks for due deliveries at start and then every PollInterval, and wakes the
// senders they belong to, until ctx ends. It finds what no nudge announces: deliveries that
// fell due since they were written (a retry after its backoff, webhook_delay), deliveries
// written by another gateway process, claims that ran out, and whatever a sender left after
// an error. It is one read per interval however many senders there are, where a poll by each
// sender would be one write each (a claim), most of them finding nothing.
func (g *Gateway) runPoller(ctx context.Context) {
	ticker := time.NewTicker(g.cfg.PollInterval)
	defer ticker.Stop()
	for {
		var senders []int
		now := g.now()
		err := g.db.WithContext(ctx).Raw(`SELECT DISTINCT lane % ? FROM gw_deliveries
			WHERE status = ? AND next_attempt_at <= ? AND (claimed_until IS NULL OR claimed_until <= ?)`,
			g.cfg.Senders, deliveryPending, now, now).Scan(&senders).Error
		if err != nil && ctx.Err() == nil {
			g.log.Error("look for due webhooks", "err", err)
		}
		for _, n := range senders {
			g.wakeSender(n)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// deliverDue sends every due delivery of sender n's lanes, batch by batch, until none is left.
func (g *Gateway) deliverDue(ctx context.Context, n int) error {
	for ctx.Err() == nil {
		due, err := g.claimDue(ctx, n)
		if err != nil {
			return err
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
		for i, d := range due {
			if err := g.attempt(ctx, d, byID[d.EventID]); err != nil {
				g.unclaim(due[i:]) // the next wake-up tries them again, not the end of the lease
				return err
			}
		}
	}
	return nil
}

// unclaim gives back this process's claims on the deliveries ds, which it will not attempt
// now (a database error stopped their batch).
func (g *Gateway) unclaim(ds []deliveryRow) {
	ids := make([]int64, 0, len(ds))
	for _, d := range ds {
		ids = append(ids, d.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := g.db.WithContext(ctx).Model(&deliveryRow{}).Where("id IN ? AND claimed_by = ?", ids, g.claimToken).
		Updates(map[string]any{"claimed_by": "", "claimed_until": nil}).Error
	if err != nil {
		g.log.Warn("give back claimed deliveries: they will be sent again once their claim runs out", "err", err)
	}
}

// claimDue claims up to claimBatch due deliveries of sender n's lanes for this process and
// returns them oldest due first. A delivery is due when it is pending, its next attempt time
// has come and nobody holds a live claim on it.
func (g *Gateway) claimDue(ctx context.Context, n int) ([]deliveryRow, error) {
	lock := "" // SQLite: one writer at a time, the UPDATE alone is atomic
	if g.db.Dialector.Name() == "postgres" {
		lock = "FOR UPDATE SKIP LOCKED"
	}
	q := `UPDATE gw_deliveries SET claimed_by = ?, claimed_until = ?
		WHERE id IN (
			SELECT id FROM gw_deliveries
			WHERE status = ? AND next_attempt_at <= ? AND (claimed_until IS NULL OR claimed_until <= ?)
			AND lane % ? = ?
			ORDER BY next_attempt_at, id LIMIT ? ` + lock + `)
		RETURNING *`
	now := g.now()
	var due []deliveryRow
	if err := g.db.WithContext(ctx).Raw(q, g.claimToken, now.Add(g.claimLease()),
		deliveryPending, now, now, g.cfg.Senders, n, claimBatch).Scan(&due).Error; err != nil {
		return nil, fmt.Errorf("claim due deliveries: %w", err)
	}
	// RETURNING gives the rows in no promised order.
	slices.SortFunc(due, func(a, b deliveryRow) int {
		return cmp.Or(a.NextAttemptAt.Compare(b.NextAttemptAt), cmp.Compare(a.ID, b.ID))
	})
	return due, nil
}

// releaseClaims gives back the claims this process holds on deliveries still pending. It runs
// once the senders have stopped, with a context of its own: the senders' has ended.
func (g *Gateway) releaseClaims() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := g.db.WithContext(ctx).Model(&deliveryRow{}).Where("claimed_by = ? AND status = ?", g.claimToken, deliveryPending).
		Updates(map[string]any{"claimed_by": "", "claimed_until": nil}).Error
	if err != nil {
		g.log.Warn("give back claimed deliveries: they will be sent again once their claim runs out", "err", err)
	}
}

// errClaimLost is a delivery whose claim ran out and was taken by another sender before this
// one recorded its attempt: that sender records its own.
var errClaimLost = errors.New("the claim on the delivery ran out before its attempt was recorded")

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
		return nil // shutting down: the delivery stays pending, runSenders gives its claim back
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
	// The attempt is recorded and the claim given back in one transaction, and only while the
	// claim is still this process's.
	upd["claimed_by"], upd["claimed_until"] = "", nil
	err = g.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&deliveryRow{}).Where("id = ? AND claimed_by = ?", d.ID, g.claimToken).Updates(upd)
		if res.Error != nil {
			return fmt.Errorf("update delivery: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return errClaimLost
		}
		if err := tx.Create(&a).Error; err != nil {
			return fmt.Errorf("record attempt: %w", err)
		}
		return nil
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return nil
	case errors.Is(err, errClaimLost):
		log.Warn("webhook attempt not recorded", "err", err)
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
