package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Chaos run statuses.
const (
	ChaosRunning = "running"
	ChaosDone    = "done"   // judged: Result holds the result
	ChaosFailed  = "failed" // the run could not be made: Error says why
)

// ChaosRun is one chaos run of the failure lab, as the chaos_runs table keeps it.
type ChaosRun struct {
	ID            string `gorm:"primaryKey"`
	Seed          int64
	Purchases     int
	Clients       int
	Replicas      int
	ProtectionOff string
	Status        string
	OK            bool
	Verdict       string
	Result        string // the judged run as JSON
	Error         string
	CreatedAt     time.Time
	FinishedAt    *time.Time
}

// ChaosRunStore keeps chaos runs.
type ChaosRunStore struct{ db *gorm.DB }

// NewChaosRunStore returns a store on db.
func NewChaosRunStore(db *gorm.DB) *ChaosRunStore { return &ChaosRunStore{db: db} }

// Start records a run that is starting, with status running.
func (s *ChaosRunStore) Start(ctx context.Context, r *ChaosRun) error {
	r.Status, r.CreatedAt = ChaosRunning, time.Now().UTC()
	if err := s.db.WithContext(ctx).Create(r).Error; err != nil {
		return fmt.Errorf("record chaos run: %w", err)
	}
	return nil
}

// Finish records how run id ended: done with its verdict and result, or failed with why.
func (s *ChaosRunStore) Finish(ctx context.Context, id, status string, ok bool, verdict, result, why string) error {
	now := time.Now().UTC()
	err := s.db.WithContext(ctx).Model(&ChaosRun{}).Where("id = ?", id).Updates(map[string]any{
		"status": status, "ok": ok, "verdict": verdict, "result": result, "error": why, "finished_at": now,
	}).Error
	if err != nil {
		return fmt.Errorf("finish chaos run: %w", err)
	}
	return nil
}

// Get returns run id, or ErrNotFound.
func (s *ChaosRunStore) Get(ctx context.Context, id string) (*ChaosRun, error) {
	var r ChaosRun
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load chaos run: %w", err)
	}
	return &r, nil
}

// Recent returns the last limit runs, newest first, without their results.
func (s *ChaosRunStore) Recent(ctx context.Context, limit int) ([]ChaosRun, error) {
	var runs []ChaosRun
	err := s.db.WithContext(ctx).Omit("result").Order("created_at DESC").Limit(limit).Find(&runs).Error
	if err != nil {
		return nil, fmt.Errorf("list chaos runs: %w", err)
	}
	return runs, nil
}
