package models_test

import (
	"context"
	"errors"
	"testing"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// TestChaosRunStore: a run is kept from its start, finished once with its result, and listed
// newest first without its result.
func TestChaosRunStore(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := models.NewChaosRunStore(db)
		first := &models.ChaosRun{ID: "chaos_first", Seed: 1, Purchases: 10, Clients: 2, Replicas: 2}
		second := &models.ChaosRun{ID: "chaos_second", Seed: 2, Purchases: 20, Clients: 2, Replicas: 3, ProtectionOff: "derived_gateway_key"}
		for _, r := range []*models.ChaosRun{first, second} {
			if err := s.Start(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Finish(ctx, "chaos_second", models.ChaosDone, true, "reproduced", `{"seed":2}`, ""); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, "chaos_second")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != models.ChaosDone || !got.OK || got.Result != `{"seed":2}` || got.FinishedAt == nil || got.ProtectionOff != "derived_gateway_key" {
			t.Errorf("got %+v, want done, ok, its result and a finish time", got)
		}
		if r, _ := s.Get(ctx, "chaos_first"); r.Status != models.ChaosRunning || r.OK {
			t.Errorf("the unfinished run: got status %q ok %v, want running, not ok", r.Status, r.OK)
		}
		recent, err := s.Recent(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(recent) != 2 || recent[0].ID != "chaos_second" || recent[0].Result != "" {
			t.Errorf("recent: got %+v, want chaos_second first, without its result", recent)
		}
		if _, err := s.Get(ctx, "chaos_none"); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("Get of an unknown run: got %v, want ErrNotFound", err)
		}
	})
}
