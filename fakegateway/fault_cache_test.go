package fakegateway_test

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"
)

// countFaultReads counts the queries on gw_faults from now on.
func countFaultReads(tb testing.TB, db *gorm.DB) *atomic.Int64 {
	tb.Helper()
	var n atomic.Int64
	err := db.Callback().Query().After("gorm:query").Register("test:count_fault_reads", func(tx *gorm.DB) {
		if tx.Statement.Table == "gw_faults" {
			n.Add(1)
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	return &n
}

// TestFaultCache: with no fault armed, a charge does not read the faults table once the armed
// set is known; a fault armed through the control API strikes the very next charge, exactly
// its times, and a disarmed one does not strike; the history keeps every fault.
func TestFaultCache(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		g := mustGateway(t, dialect, noSender)
		reads := countFaultReads(t, g.db)
		charge := func(k string) int {
			return g.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(500, cardOK, "ord_"+k), key(k)).Status
		}
		charge("warm") // reads the armed set once
		before := reads.Load()
		for i := range 3 {
			if s := charge("quiet-" + strconv.Itoa(i)); s != http.StatusCreated {
				t.Fatalf("charge: got %d, want 201", s)
			}
		}
		if n := reads.Load() - before; n != 0 {
			t.Errorf("three charges with no fault armed: got %d reads of gw_faults, want 0", n)
		}

		g.mustArm(t, map[string]any{"fault": "error_before_commit", "times": 2})
		for i, want := range []int{http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusCreated} {
			if s := charge("armed-" + strconv.Itoa(i)); s != want {
				t.Errorf("charge %d after arming twice: got %d, want %d", i, s, want)
			}
		}

		g.mustArm(t, map[string]any{"fault": "decline"})
		armed := g.armedFaults(t)
		if len(armed) != 1 {
			t.Fatalf("got %d armed faults, want 1", len(armed))
		}
		if r := g.mustDo(t, http.MethodDelete, "/_control/faults/"+strconv.FormatInt(armed[0].ID, 10), nil, nil); r.Status != http.StatusOK {
			t.Fatalf("disarm: got %d", r.Status)
		}
		if s := charge("disarmed"); s != http.StatusCreated {
			t.Errorf("charge after disarming: got %d, want 201", s)
		}

		var spent int64
		g.db.Table("gw_faults").Count(&spent)
		if spent != 2 {
			t.Errorf("fault history: got %d rows, want 2 (spent and disarmed)", spent)
		}
	})
}
