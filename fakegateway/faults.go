package fakegateway

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"gorm.io/gorm"
)

// Fault names, as docs/failure-modes.md explains them.
const (
	faultLatency              = "latency"
	faultErrorBeforeCommit    = "error_before_commit"
	faultTimeoutBeforeCommit  = "timeout_before_commit"
	faultCommitThenDrop       = "commit_then_drop"
	faultCommitThenDelay      = "commit_then_delay"
	faultCommitThenError      = "commit_then_error"
	faultDecline              = "decline"
	faultWebhookDuplicate     = "webhook_duplicate"
	faultWebhookReorder       = "webhook_reorder"
	faultWebhookDelay         = "webhook_delay"
	faultWebhookFail          = "webhook_fail"
	faultIgnoreIdempotencyKey = "ignore_idempotency_key"
)

// faultSpec says which parameters a fault takes. Parameters a fault does not take are
// refused, so a typo in a drill fails loudly instead of silently doing nothing.
type faultSpec struct {
	Name        string
	Description string
	Delay       bool
	Status      bool
	Copies      bool
	Code        bool
}

// faultSpecs lists every fault, in the order the gateway page shows them.
var faultSpecs = []faultSpec{
	{Name: faultLatency, Description: "waits delay_ms, then charges and answers normally", Delay: true},
	{Name: faultErrorBeforeCommit, Description: "answers status (default 503); nothing is charged", Status: true},
	{Name: faultTimeoutBeforeCommit, Description: "hangs delay_ms (default 30 s) and closes; nothing is charged", Delay: true},
	{Name: faultCommitThenDrop, Description: "charges, then closes the connection without a response"},
	{Name: faultCommitThenDelay, Description: "charges, then answers only after delay_ms (default 30 s)", Delay: true},
	{Name: faultCommitThenError, Description: "charges, then answers status (default 500)", Status: true},
	{Name: faultDecline, Description: "declines with code (default card_declined)", Code: true},
	{Name: faultWebhookDuplicate, Description: "each event of the next charge is delivered copies times (default 3)", Copies: true},
	{Name: faultWebhookReorder, Description: "the next charge's events arrive in reverse order"},
	{Name: faultWebhookDelay, Description: "webhooks of the next charge are sent after delay_ms", Delay: true},
	{Name: faultWebhookFail, Description: "the next delivery attempts fail, forcing retries"},
	{Name: faultIgnoreIdempotencyKey, Description: "treats every call as new, like a provider without idempotency"},
}

func specOf(name string) (faultSpec, bool) {
	for _, s := range faultSpecs {
		if s.Name == name {
			return s, true
		}
	}
	return faultSpec{}, false
}

// outcomeFaults decide what happens to a charge request around the commit. At most one of
// them strikes per request: the oldest armed one whose dice say yes.
var outcomeFaults = []string{
	faultErrorBeforeCommit, faultTimeoutBeforeCommit, faultCommitThenDrop, faultCommitThenDelay, faultCommitThenError,
}

// declineCodes are the failure codes a decline fault may use.
var declineCodes = map[string]bool{
	"card_declined": true, "insufficient_funds": true, "expired_card": true, "incorrect_cvc": true,
	"processing_error": true, "do_not_honor": true, "fraudulent": true, "lost_card": true, "stolen_card": true,
}

// FaultRequest is the body of POST /_control/faults. Pointers tell "absent" from zero.
type FaultRequest struct {
	Fault       string   `json:"fault"`
	Times       *int     `json:"times,omitempty"`
	Probability *float64 `json:"probability,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
	DelayMS     *int     `json:"delay_ms,omitempty"`
	Status      *int     `json:"status,omitempty"`
	Copies      *int     `json:"copies,omitempty"`
	Code        *string  `json:"code,omitempty"`
}

// Fault is an armed fault as GET /_control/faults lists it.
type Fault struct {
	ID          int64   `json:"id"`
	Fault       string  `json:"fault"`
	Times       int     `json:"times"`
	Remaining   int     `json:"remaining"`
	Probability float64 `json:"probability"`
	Seed        int64   `json:"seed"`
	DelayMS     int     `json:"delay_ms,omitempty"`
	Status      int     `json:"status,omitempty"`
	Copies      int     `json:"copies,omitempty"`
	Code        string  `json:"code,omitempty"`
	Created     int64   `json:"created"`
}

func (r faultRow) view() Fault {
	return Fault{ID: r.ID, Fault: r.Fault, Times: r.Times, Remaining: r.Remaining, Probability: r.Probability,
		Seed: r.Seed, DelayMS: r.DelayMS, Status: r.Status, Copies: r.Copies, Code: r.Code, Created: r.CreatedAt.Unix()}
}

// toRow validates a fault request and fills in defaults. It returns a 400 naming the first
// problem: an unknown fault, a parameter the fault does not take, or a value out of range.
func (req FaultRequest) toRow(now time.Time) (faultRow, error) {
	spec, ok := specOf(req.Fault)
	if !ok {
		return faultRow{}, badRequest("unknown_fault", "unknown fault %q", req.Fault)
	}
	row := faultRow{Fault: spec.Name, Times: 1, Probability: 1, CreatedAt: now}
	if req.Times != nil {
		if *req.Times < 1 || *req.Times > 1000 {
			return faultRow{}, invalid("times must be between 1 and 1000")
		}
		row.Times = *req.Times
	}
	row.Remaining = row.Times
	if req.Probability != nil {
		if !(*req.Probability > 0 && *req.Probability <= 1) {
			return faultRow{}, invalid("probability must be greater than 0 and at most 1")
		}
		row.Probability = *req.Probability
	}
	if req.Seed != nil {
		row.Seed = *req.Seed
	} else {
		// A seed is always recorded, so any run can be replayed from the fault list.
		row.Seed = rand.Int64N(1 << 53)
	}
	notFor := func(param string) error {
		return invalid("%s does not apply to fault %s", param, spec.Name)
	}
	switch {
	case req.DelayMS != nil && !spec.Delay:
		return faultRow{}, notFor("delay_ms")
	case req.Status != nil && !spec.Status:
		return faultRow{}, notFor("status")
	case req.Copies != nil && !spec.Copies:
		return faultRow{}, notFor("copies")
	case req.Code != nil && !spec.Code:
		return faultRow{}, notFor("code")
	}
	if spec.Delay {
		row.DelayMS = 1000
		if spec.Name == faultTimeoutBeforeCommit || spec.Name == faultCommitThenDelay {
			row.DelayMS = int(DefaultFaultDelay / time.Millisecond)
		}
		if req.DelayMS != nil {
			if *req.DelayMS < 0 || *req.DelayMS > 600000 {
				return faultRow{}, invalid("delay_ms must be between 0 and 600000")
			}
			row.DelayMS = *req.DelayMS
		}
	}
	if spec.Status {
		row.Status = 503
		if spec.Name == faultCommitThenError {
			row.Status = 500
		}
		if req.Status != nil {
			row.Status = *req.Status
		}
		if err := checkFaultStatus(spec.Name, row.Status); err != nil {
			return faultRow{}, err
		}
	}
	if spec.Copies {
		row.Copies = 3
		if req.Copies != nil {
			if *req.Copies < 1 || *req.Copies > 20 {
				return faultRow{}, invalid("copies must be between 1 and 20")
			}
			row.Copies = *req.Copies
		}
	}
	if spec.Code {
		row.Code = "card_declined"
		if req.Code != nil {
			if !declineCodes[*req.Code] {
				return faultRow{}, invalid("code %q is not a known decline code", *req.Code)
			}
			row.Code = *req.Code
		}
	}
	return row, nil
}

// checkFaultStatus keeps the gateway's status promise (see docs/failure-modes.md): 402 means
// declined, 503 and 429 mean "not processed", every other 4xx means "refused before any
// work". So an error before the commit may use any 4xx/5xx but 402, and an error after the
// commit must be a 5xx that promises nothing: 500, 502, 504 and the like.
func checkFaultStatus(fault string, status int) error {
	if status < 400 || status > 599 || status == 402 {
		return invalid("status must be 400 to 599 and not 402 (402 means declined)")
	}
	if fault == faultCommitThenError && (status < 500 || status == 503) {
		return invalid("commit_then_error needs a 5xx other than 503: a 4xx or 503 promises nothing was charged")
	}
	return nil
}

// faultDice holds one seeded random source per armed fault, so a fault armed with a seed
// strikes in the same pattern every run. The sources live in memory: after a restart a
// fault's sequence starts again from its seed.
//
// It also caches which faults are armed. A charge asks for faults up to seven times (ignore
// key, latency, the outcome faults, decline, three webhook faults), and almost always none is
// armed: without the cache that is seven reads of gw_faults per charge. The cache holds the
// names of the armed faults, read from the table when it is empty; every write to the table
// empties it in this process — arming (armFault), disarming one or all (forget, reset) and a
// strike that counts a fault down (takeFault) — so a fault armed through the control API
// strikes the very next charge, exactly as before. Only "is any of these armed?" is answered
// from memory: a fault that is armed is still read and counted down in the database, so the
// history and the remaining counts stay the table's. A generation number keeps a read that
// raced with a write from filling the cache with what it saw before the write.
type faultDice struct {
	mu      sync.Mutex
	sources map[int64]*rand.Rand

	armed      map[string]bool // names of the armed faults; nil: not known, read the table
	generation uint64          // counts invalidations
}

func newFaultDice() *faultDice { return &faultDice{sources: map[int64]*rand.Rand{}} }

// roll reports whether the fault strikes this time.
func (d *faultDice) roll(f faultRow) bool {
	if f.Probability >= 1 {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.sources[f.ID]
	if !ok {
		// The stream depends on the seed alone: arming the same fault with the same seed again
		// replays the same sequence.
		r = rand.New(rand.NewPCG(uint64(f.Seed), 0x9e3779b97f4a7c15))
		d.sources[f.ID] = r
	}
	return r.Float64() < f.Probability
}

// forget drops one fault's source, once it is disarmed.
func (d *faultDice) forget(id int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.sources, id)
	d.invalidateLocked()
}

func (d *faultDice) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.sources)
	d.invalidateLocked()
}

// invalidate empties the cache of armed faults, after a write to gw_faults.
func (d *faultDice) invalidate() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.invalidateLocked()
}

func (d *faultDice) invalidateLocked() {
	d.armed = nil
	d.generation++
}

// anyArmed reports whether a fault of names may be armed, reading the armed names from db
// when the cache is empty.
func (d *faultDice) anyArmed(ctx context.Context, db *gorm.DB, names []string) (bool, error) {
	d.mu.Lock()
	armed, gen := d.armed, d.generation
	d.mu.Unlock()
	if armed == nil {
		var rows []string
		if err := db.WithContext(ctx).Model(&faultRow{}).Where("remaining > 0 AND disarmed_at IS NULL").
			Distinct().Pluck("fault", &rows).Error; err != nil {
			return false, fmt.Errorf("load armed faults: %w", err)
		}
		armed = map[string]bool{}
		for _, name := range rows {
			armed[name] = true
		}
		d.mu.Lock()
		if d.generation == gen { // no write since we started reading: what we saw is current
			d.armed = armed
		}
		d.mu.Unlock()
	}
	for _, name := range names {
		if armed[name] {
			return true, nil
		}
	}
	return false, nil
}

// takeFault returns the oldest armed fault among names whose dice strike, after counting it
// down with a conditional UPDATE (two concurrent requests cannot both take the last strike).
// It returns nil when no fault strikes. db may be a transaction.
func (g *Gateway) takeFault(ctx context.Context, db *gorm.DB, names ...string) (*faultRow, error) {
	if any, err := g.faults.anyArmed(ctx, db, names); err != nil || !any {
		return nil, err // the usual case: none armed, known without a read
	}
	var armed []faultRow
	if err := db.WithContext(ctx).Where("fault IN ? AND remaining > 0 AND disarmed_at IS NULL", names).Order("id").Find(&armed).Error; err != nil {
		return nil, fmt.Errorf("load armed faults: %w", err)
	}
	if len(armed) == 0 {
		// The cache said armed, the table says spent (a strike in a transaction that
		// committed after the cache was read): read it afresh next time.
		g.faults.invalidate()
	}
	for _, f := range armed {
		if !g.faults.roll(f) {
			continue
		}
		res := db.WithContext(ctx).Model(&faultRow{}).Where("id = ? AND remaining > 0 AND disarmed_at IS NULL", f.ID).
			Update("remaining", gorm.Expr("remaining - 1"))
		if res.Error != nil {
			return nil, fmt.Errorf("take fault %s: %w", f.Fault, res.Error)
		}
		// Counted down (or lost a race to another strike): the armed set may have changed.
		g.faults.invalidate()
		if res.RowsAffected == 1 {
			f.Remaining--
			g.log.InfoContext(ctx, "fault strikes", "fault", f.Fault, "fault_id", f.ID, "remaining", f.Remaining)
			return &f, nil
		}
	}
	return nil, nil
}

// armFault validates req and stores the armed fault. It returns a 400 and writes nothing if
// req is invalid.
func (g *Gateway) armFault(ctx context.Context, req FaultRequest) (Fault, error) {
	row, err := req.toRow(g.now())
	if err != nil {
		return Fault{}, err
	}
	err = g.db.WithContext(ctx).Create(&row).Error
	g.faults.invalidate() // even on an error: the row may exist
	if err != nil {
		return Fault{}, fmt.Errorf("arm fault: %w", err)
	}
	g.log.InfoContext(ctx, "fault armed", "fault", row.Fault, "fault_id", row.ID, "times", row.Times,
		"probability", row.Probability, "seed", row.Seed)
	return row.view(), nil
}

// armedFaults lists the faults that can still strike, oldest first.
func (g *Gateway) armedFaults(ctx context.Context) ([]Fault, error) {
	var rows []faultRow
	if err := g.db.WithContext(ctx).Where("remaining > 0 AND disarmed_at IS NULL").Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list faults: %w", err)
	}
	out := make([]Fault, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.view())
	}
	return out, nil
}

// disarmAll disarms every armed fault and forgets their random sources. The rows stay, as
// the page's history of spent and disarmed faults.
func (g *Gateway) disarmAll(ctx context.Context) error {
	if err := g.db.WithContext(ctx).Model(&faultRow{}).Where("disarmed_at IS NULL AND remaining > 0").
		Update("disarmed_at", g.now()).Error; err != nil {
		return fmt.Errorf("disarm faults: %w", err)
	}
	g.faults.reset()
	g.log.InfoContext(ctx, "faults disarmed")
	return nil
}
