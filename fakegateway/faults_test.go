package fakegateway_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"checkoutlab/fakegateway"
)

// isTimeout reports whether a client error is the client giving up, as opposed to the server
// closing the connection.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// chargesUnder returns the charges the gateway made under key.
func (g *testGateway) chargesUnder(t *testing.T, k string) []fakegateway.Charge {
	t.Helper()
	var list fakegateway.ChargeList
	g.mustDo(t, http.MethodGet, "/v1/charges?idempotency_key="+k, nil, nil).decode(t, &list)
	return list.Data
}

// settledChargesUnder waits (generously) until want charges exist under key, for requests
// whose client gave up while the gateway may still be committing, and returns them.
func (g *testGateway) settledChargesUnder(t *testing.T, k string, want int) []fakegateway.Charge {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		got := g.chargesUnder(t, k)
		if len(got) >= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFaults(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		g := mustGateway(t, dialect, noSender)
		charge := func(k, card string, timeout time.Duration) (response, error) {
			return g.do(http.MethodPost, "/v1/charges", chargeBody(1000, card, "ord_"+k), key(k), timeout)
		}
		// replayOK retries under k after the fault and expects the normal answer with the
		// charge that is already in the ledger, if any.
		replayOK := func(t *testing.T, k string, want []fakegateway.Charge) {
			t.Helper()
			r, err := charge(k, cardOK, waitFor)
			if err != nil || r.Status != http.StatusCreated {
				t.Fatalf("retry: got %v %d %s, want 201", err, r.Status, r.Body)
			}
			var ch fakegateway.Charge
			r.decode(t, &ch)
			if len(want) == 1 && ch.ID != want[0].ID {
				t.Errorf("retry: got charge %s, want the committed %s", ch.ID, want[0].ID)
			}
			if got := g.chargesUnder(t, k); len(got) != 1 {
				t.Errorf("after retry: got %d charges, want exactly 1", len(got))
			}
		}

		t.Run("Latency", func(t *testing.T) {
			g.mustArm(t, map[string]any{"fault": "latency", "delay_ms": 200})
			start := time.Now()
			r, err := charge("f-latency", cardOK, waitFor)
			if err != nil || r.Status != http.StatusCreated {
				t.Fatalf("got %v %d, want 201", err, r.Status)
			}
			if took := time.Since(start); took < 200*time.Millisecond {
				t.Errorf("answered after %v, want at least the 200ms latency", took)
			}
			if n := len(g.chargesUnder(t, "f-latency")); n != 1 {
				t.Errorf("got %d charges, want 1", n)
			}
		})
		t.Run("ErrorBeforeCommit", func(t *testing.T) {
			g.mustArm(t, map[string]any{"fault": "error_before_commit"})
			r, err := charge("f-ebc", cardOK, waitFor)
			if err != nil || r.Status != http.StatusServiceUnavailable {
				t.Fatalf("got %v %d, want 503", err, r.Status)
			}
			if n := len(g.chargesUnder(t, "f-ebc")); n != 0 {
				t.Errorf("got %d charges, want none", n)
			}
			g.mustArm(t, map[string]any{"fault": "error_before_commit", "status": 429})
			if r, _ := charge("f-ebc", cardOK, waitFor); r.Status != http.StatusTooManyRequests {
				t.Errorf("got %d, want the armed 429", r.Status)
			}
			replayOK(t, "f-ebc", nil)
		})
		t.Run("TimeoutBeforeCommitClientGivesUp", func(t *testing.T) {
			g.mustArm(t, map[string]any{"fault": "timeout_before_commit", "delay_ms": 10000})
			_, err := charge("f-tbc", cardOK, 200*time.Millisecond)
			if !isTimeout(err) {
				t.Fatalf("got %v, want a client timeout", err)
			}
			if n := len(g.chargesUnder(t, "f-tbc")); n != 0 {
				t.Errorf("got %d charges, want none", n)
			}
			replayOK(t, "f-tbc", nil)
		})
		t.Run("TimeoutBeforeCommitServerCloses", func(t *testing.T) {
			g.mustArm(t, map[string]any{"fault": "timeout_before_commit", "delay_ms": 50})
			_, err := charge("f-tbc2", cardOK, waitFor)
			if err == nil || isTimeout(err) {
				t.Fatalf("got %v, want the connection closed without an answer", err)
			}
			if n := len(g.chargesUnder(t, "f-tbc2")); n != 0 {
				t.Errorf("got %d charges, want none", n)
			}
		})
		t.Run("CommitThenDrop", func(t *testing.T) {
			g.mustArm(t, map[string]any{"fault": "commit_then_drop"})
			r, err := charge("f-ctd", cardOK, waitFor)
			if err == nil || isTimeout(err) {
				t.Fatalf("got %v %d, want EOF or a reset", err, r.Status)
			}
			committed := g.settledChargesUnder(t, "f-ctd", 1)
			if len(committed) != 1 || committed[0].Status != "succeeded" {
				t.Fatalf("got %+v, want one succeeded charge", committed)
			}
			replayOK(t, "f-ctd", committed)
		})
		t.Run("CommitThenDelay", func(t *testing.T) {
			g.mustArm(t, map[string]any{"fault": "commit_then_delay", "delay_ms": 10000})
			_, err := charge("f-ctdl", cardOK, 200*time.Millisecond)
			if !isTimeout(err) {
				t.Fatalf("got %v, want a client timeout", err)
			}
			committed := g.settledChargesUnder(t, "f-ctdl", 1)
			if len(committed) != 1 {
				t.Fatalf("got %d charges, want 1", len(committed))
			}
			replayOK(t, "f-ctdl", committed)
		})
		t.Run("CommitThenError", func(t *testing.T) {
			g.mustArm(t, map[string]any{"fault": "commit_then_error"})
			r, err := charge("f-cte", cardOK, waitFor)
			if err != nil || r.Status != http.StatusInternalServerError {
				t.Fatalf("got %v %d, want 500", err, r.Status)
			}
			committed := g.chargesUnder(t, "f-cte")
			if len(committed) != 1 {
				t.Fatalf("got %d charges, want 1", len(committed))
			}
			replayOK(t, "f-cte", committed)
		})
		t.Run("Decline", func(t *testing.T) {
			g.mustArm(t, map[string]any{"fault": "decline", "code": "expired_card"})
			r, err := charge("f-decline", cardOK, waitFor)
			if err != nil || r.Status != http.StatusPaymentRequired {
				t.Fatalf("got %v %d, want 402", err, r.Status)
			}
			var ch fakegateway.Charge
			r.decode(t, &ch)
			if ch.Status != "failed" || ch.FailureCode != "expired_card" {
				t.Errorf("got %s %q, want failed expired_card", ch.Status, ch.FailureCode)
			}
			// A replay answers the stored decline, whatever is armed now.
			r, _ = charge("f-decline", cardOK, waitFor)
			if r.Status != http.StatusPaymentRequired {
				t.Errorf("replay: got %d, want 402", r.Status)
			}
		})
		t.Run("IgnoreIdempotencyKey", func(t *testing.T) {
			g.mustArm(t, map[string]any{"fault": "ignore_idempotency_key", "times": 2})
			ids := map[string]bool{}
			for range 4 {
				r, err := charge("f-ignore", cardOK, waitFor)
				if err != nil || r.Status != http.StatusCreated {
					t.Fatalf("got %v %d, want 201", err, r.Status)
				}
				var ch fakegateway.Charge
				r.decode(t, &ch)
				ids[ch.ID] = true
			}
			// Two calls ignored the key, the third claimed it, the fourth replayed the third.
			if got := len(g.chargesUnder(t, "f-ignore")); got != 3 || len(ids) != 3 {
				t.Errorf("got %d charges (%d distinct answers), want 3", got, len(ids))
			}
		})
		t.Run("CardCommitThenDrop", func(t *testing.T) {
			if _, err := charge("c-drop", cardDrop, waitFor); err == nil || isTimeout(err) {
				t.Fatalf("got %v, want EOF or a reset", err)
			}
			committed := g.settledChargesUnder(t, "c-drop", 1)
			if len(committed) != 1 {
				t.Fatalf("got %d charges, want 1", len(committed))
			}
			r, err := charge("c-drop", cardDrop, waitFor)
			var ch fakegateway.Charge
			if err == nil {
				r.decode(t, &ch)
			}
			if err != nil || r.Status != http.StatusCreated || ch.ID != committed[0].ID {
				t.Errorf("replay: got %v %d %s, want 201 %s", err, r.Status, ch.ID, committed[0].ID)
			}
		})
		t.Run("CardCommitThenDelay", func(t *testing.T) {
			if _, err := charge("c-delay", cardDelay, 200*time.Millisecond); !isTimeout(err) {
				t.Fatalf("got %v, want a client timeout", err)
			}
			if n := len(g.settledChargesUnder(t, "c-delay", 1)); n != 1 {
				t.Fatalf("got %d charges, want 1", n)
			}
			if r, err := charge("c-delay", cardDelay, waitFor); err != nil || r.Status != http.StatusCreated {
				t.Errorf("replay: got %v %d, want 201 at once", err, r.Status)
			}
		})
		t.Run("CardErrorBeforeCommit", func(t *testing.T) {
			if r, err := charge("c-ebc", cardErrorBefore, waitFor); err != nil || r.Status != http.StatusServiceUnavailable {
				t.Fatalf("got %v %d, want 503", err, r.Status)
			}
			if n := len(g.chargesUnder(t, "c-ebc")); n != 0 {
				t.Fatalf("got %d charges, want none", n)
			}
			if r, err := charge("c-ebc", cardErrorBefore, waitFor); err != nil || r.Status != http.StatusCreated {
				t.Errorf("retry: got %v %d, want 201", err, r.Status)
			}
			if n := len(g.chargesUnder(t, "c-ebc")); n != 1 {
				t.Errorf("got %d charges, want 1", n)
			}
		})
		t.Run("ListAndDisarm", func(t *testing.T) {
			g.mustArm(t, map[string]any{"fault": "latency", "times": 3, "delay_ms": 1, "seed": 7})
			var list fakegateway.FaultList
			g.mustDo(t, http.MethodGet, "/_control/faults", nil, nil).decode(t, &list)
			if len(list.Faults) != 1 || list.Faults[0].Fault != "latency" || list.Faults[0].Remaining != 3 || list.Faults[0].Seed != 7 {
				t.Fatalf("got %+v, want one latency fault with 3 remaining, seed 7", list.Faults)
			}
			if r := g.mustDo(t, http.MethodDelete, "/_control/faults", nil, nil); r.Status != http.StatusOK {
				t.Fatalf("disarm: got %d", r.Status)
			}
			g.mustDo(t, http.MethodGet, "/_control/faults", nil, nil).decode(t, &list)
			if len(list.Faults) != 0 {
				t.Errorf("got %d faults after disarm, want 0", len(list.Faults))
			}
		})
		t.Run("SeedReproducesSequence", func(t *testing.T) {
			run := func(round int) string {
				g.mustDo(t, http.MethodDelete, "/_control/faults", nil, nil)
				g.mustArm(t, map[string]any{"fault": "error_before_commit", "times": 100, "probability": 0.5, "seed": 42})
				pattern := ""
				for i := range 24 {
					r, err := charge(fmt.Sprintf("seed-%d-%d", round, i), cardOK, waitFor)
					if err != nil {
						t.Fatal(err)
					}
					if r.Status == http.StatusServiceUnavailable {
						pattern += "x"
					} else {
						pattern += "."
					}
				}
				return pattern
			}
			first, second := run(1), run(2)
			if first != second {
				t.Errorf("got %s then %s, want the same sequence", first, second)
			}
			if !containsBoth(first) {
				t.Errorf("sequence %s: want some strikes and some misses at probability 0.5", first)
			}
			g.mustDo(t, http.MethodDelete, "/_control/faults", nil, nil)
		})
	})
}

func containsBoth(s string) bool {
	var x, dot bool
	for _, c := range s {
		x = x || c == 'x'
		dot = dot || c == '.'
	}
	return x && dot
}
