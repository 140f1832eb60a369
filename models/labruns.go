package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Lab run statuses.
const (
	LabRunRunning = "running"
	LabRunDone    = "done"
)

// LabRun is one run of a failure-lab scenario, kept in the shop's database. Result is the
// run's whole result as JSON (package payments/lab's Result), written when the run ends.
type LabRun struct {
	ID         string `gorm:"primaryKey"`
	Scenario   string
	Mode       string
	Status     string
	Outcome    string
	OK         bool `gorm:"column:ok"`
	Result     string
	CreatedAt  time.Time
	FinishedAt *time.Time
}

// TableName tells GORM the table's name.
func (LabRun) TableName() string { return "lab_runs" }

// LabRunStore keeps the failure lab's runs.
type LabRunStore struct{ db *gorm.DB }

// NewLabRunStore returns a LabRunStore on db.
func NewLabRunStore(db *gorm.DB) *LabRunStore { return &LabRunStore{db: db} }

// Start records a run that has begun: status running, no result yet.
func (s *LabRunStore) Start(ctx context.Context, id, scenario, mode string) error {
	run := LabRun{ID: id, Scenario: scenario, Mode: mode, Status: LabRunRunning, CreatedAt: now()}
	if err := s.db.WithContext(ctx).Create(&run).Error; err != nil {
		return fmt.Errorf("start lab run: %w", err)
	}
	return nil
}

// Finish records the end of run id with its outcome and result (JSON).
func (s *LabRunStore) Finish(ctx context.Context, id string, ok bool, outcome, result string) error {
	res := s.db.WithContext(ctx).Model(&LabRun{}).Where("id = ?", id).
		Updates(map[string]any{"status": LabRunDone, "ok": ok, "outcome": outcome, "result": result, "finished_at": now()})
	if res.Error != nil {
		return fmt.Errorf("finish lab run: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrNotFound.Msgf("no lab run %q", id)
	}
	return nil
}

// Get returns run id, or ErrNotFound.
func (s *LabRunStore) Get(ctx context.Context, id string) (*LabRun, error) {
	var run LabRun
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&run).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound.Msgf("no lab run %q", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get lab run: %w", err)
	}
	return &run, nil
}

// List returns the latest limit runs, newest first, without their results.
func (s *LabRunStore) List(ctx context.Context, limit int) ([]LabRun, error) {
	var runs []LabRun
	err := s.db.WithContext(ctx).Omit("result").Order("created_at DESC, id DESC").Limit(limit).Find(&runs).Error
	if err != nil {
		return nil, fmt.Errorf("list lab runs: %w", err)
	}
	return runs, nil
}

// Latest returns the newest finished run of each scenario and mode, keyed "scenario/mode",
// without their results.
func (s *LabRunStore) Latest(ctx context.Context) (map[string]LabRun, error) {
	db := s.db.WithContext(ctx)
	newest := db.Model(&LabRun{}).Select("scenario, mode, MAX(created_at) AS created_at").
		Where("status = ?", LabRunDone).Group("scenario, mode")
	var runs []LabRun
	err := db.Omit("result").Table("lab_runs AS r").
		Joins("JOIN (?) AS n ON n.scenario = r.scenario AND n.mode = r.mode AND n.created_at = r.created_at", newest).
		Where("r.status = ?", LabRunDone).Select("r.id, r.scenario, r.mode, r.status, r.outcome, r.ok, r.created_at, r.finished_at").
		Find(&runs).Error
	if err != nil {
		return nil, fmt.Errorf("latest lab runs: %w", err)
	}
	latest := make(map[string]LabRun, len(runs))
	for _, r := range runs {
		latest[r.Scenario+"/"+r.Mode] = r
	}
	return latest, nil
}
