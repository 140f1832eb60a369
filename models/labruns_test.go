package models_test

import (
	"context"
	"errors"
	"testing"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// TestLabRuns: a run is kept from its start, finished with its result, listed newest first,
// and the latest finished run of each scenario and mode is found.
func TestLabRuns(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := models.NewLabRunStore(db)
		for _, r := range []struct{ id, scenario, mode string }{
			{"labrun_1", "lost_response", "unprotected"},
			{"labrun_2", "lost_response", "unprotected"},
			{"labrun_3", "lost_response", "protected"},
		} {
			if err := s.Start(ctx, r.id, r.scenario, r.mode); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Start(ctx, "labrun_x", "lost_response", "sideways"); err == nil {
			t.Errorf("started a run in mode sideways, want the CHECK to refuse it")
		}
		for _, id := range []string{"labrun_1", "labrun_2"} {
			if err := s.Finish(ctx, id, true, "double_charge", `{"id":"`+id+`"}`); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Finish(ctx, "labrun_nope", true, "clean", "{}"); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("finish an unknown run: got %v, want ErrNotFound", err)
		}
		got, err := s.Get(ctx, "labrun_2")
		if err != nil || got.Status != models.LabRunDone || !got.OK || got.Result != `{"id":"labrun_2"}` || got.FinishedAt == nil {
			t.Fatalf("got %+v, %v, want labrun_2 done with its result", got, err)
		}
		if _, err := s.Get(ctx, "labrun_nope"); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("get an unknown run: got %v, want ErrNotFound", err)
		}
		list, err := s.List(ctx, 10)
		if err != nil || len(list) != 3 || list[0].ID != "labrun_3" || list[0].Status != models.LabRunRunning {
			t.Fatalf("got %+v, %v, want 3 runs, newest (still running) first", list, err)
		}
		latest, err := s.Latest(ctx)
		if err != nil || len(latest) != 1 || latest["lost_response/unprotected"].ID != "labrun_2" {
			t.Errorf("got latest %+v, %v, want labrun_2 only (labrun_3 is still running)", latest, err)
		}
	})
}
