package fakegateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"gorm.io/gorm"
)

// The fault history, for the gateway page: which charge each fault struck, and the faults
// that are spent or were disarmed. None of it changes what a fault does.

// faultHitRow is one strike of a fault (gw_fault_hits). FaultID is nil for a test card's own
// fault; ChargeID is "" when the fault struck before any charge existed.
type faultHitRow struct {
	ID             int64 `gorm:"primaryKey"`
	FaultID        *int64
	Fault          string
	ChargeID       string
	IdempotencyKey string
	CreatedAt      time.Time
}

func (faultHitRow) TableName() string { return "gw_fault_hits" }

// cardFault stands for a test card's own fault when it strikes: it has no row in gw_faults.
func cardFault(behaviour string) *faultRow { return &faultRow{Fault: behaviour} }

// recordHits notes that faults (nil entries skipped) struck the request under key, and the
// charge it made or replayed ("" if none). db may be the charge's transaction, so a strike
// inside it is recorded only if the charge commits.
func (g *Gateway) recordHits(ctx context.Context, db *gorm.DB, chargeID, key string, faults ...*faultRow) error {
	var rows []faultHitRow
	for _, f := range faults {
		if f == nil {
			continue
		}
		h := faultHitRow{Fault: f.Fault, ChargeID: chargeID, IdempotencyKey: key, CreatedAt: g.now()}
		if f.ID != 0 {
			h.FaultID = &f.ID
		}
		rows = append(rows, h)
	}
	if len(rows) == 0 {
		return nil
	}
	if err := db.WithContext(ctx).Create(&rows).Error; err != nil {
		return fmt.Errorf("record fault hits: %w", err)
	}
	return nil
}

// faultHistory lists the faults that can no longer strike (spent, or disarmed), newest first.
func (g *Gateway) faultHistory(ctx context.Context, limit int) ([]faultRow, error) {
	var rows []faultRow
	err := g.db.WithContext(ctx).Where("remaining = 0 OR disarmed_at IS NOT NULL").
		Order("id DESC").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list fault history: %w", err)
	}
	return rows, nil
}

// hitsOf returns the strikes of the given faults, and those on the given charges or under
// their idempotency keys (a fault that struck an earlier attempt of the same request), oldest
// first.
func (g *Gateway) hitsOf(ctx context.Context, faultIDs []int64, chargeIDs, keys []string) ([]faultHitRow, error) {
	var rows []faultHitRow
	q := g.db.WithContext(ctx).Where("fault_id IN ?", append(faultIDs, 0))
	if len(chargeIDs) > 0 {
		q = q.Or("charge_id IN ?", chargeIDs).Or("charge_id = '' AND idempotency_key IN ?", keys)
	}
	if err := q.Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("load fault hits: %w", err)
	}
	return rows, nil
}

// disarmFault stops one armed fault; it stays in the history. It returns a 404 for an unknown
// id; disarming a fault that is already spent or disarmed changes nothing.
func (g *Gateway) disarmFault(ctx context.Context, id int64) (Fault, error) {
	err := g.db.WithContext(ctx).Model(&faultRow{}).Where("id = ? AND disarmed_at IS NULL AND remaining > 0", id).
		Update("disarmed_at", g.now()).Error
	if err != nil {
		return Fault{}, fmt.Errorf("disarm fault %d: %w", id, err)
	}
	var row faultRow
	err = g.db.WithContext(ctx).Where("id = ?", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Fault{}, notFound("no such fault %d", id)
	}
	if err != nil {
		return Fault{}, fmt.Errorf("load fault %d: %w", id, err)
	}
	g.faults.forget(id)
	g.log.InfoContext(ctx, "fault disarmed", "fault", row.Fault, "fault_id", id)
	return row.view(), nil
}

// deleteFault handles DELETE /_control/faults/:id (200 with the fault) and the page's
// POST /_control/faults/:id/disarm (303 back to the page).
func (g *Gateway) deleteFault(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		return notFound("no such fault %q", c.Param("id"))
	}
	f, err := g.disarmFault(c.Request().Context(), id)
	if c.Request().Method == http.MethodPost {
		if err == nil {
			return c.Redirect(http.StatusSeeOther, "/?disarmed="+strconv.FormatInt(f.ID, 10))
		}
		return g.redirectHome(c, err)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, f)
}
