package fakegateway_test

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"checkoutlab/fakegateway"
	"checkoutlab/payments"
)

// forCharge waits until the receiver accepted n messages about chargeID and returns them in
// arrival order.
func (r *receiver) forCharge(tb testing.TB, chargeID string, n int) []received {
	tb.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		var mine []received
		for _, m := range r.waitForN(tb, 0) {
			if m.Event.Data.Charge.ID == chargeID {
				mine = append(mine, m)
			}
		}
		if len(mine) >= n || time.Now().After(deadline) {
			if len(mine) != n {
				tb.Fatalf("got %d webhooks for %s, want %d", len(mine), chargeID, n)
			}
			return mine
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func types(ms []received) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Type)
	}
	return strings.Join(out, ",")
}

// deliveriesOf returns the deliveries of chargeID once none of them is pending any more.
func (g *testGateway) deliveriesOf(t *testing.T, chargeID string) []fakegateway.Delivery {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		var mine []fakegateway.Delivery
		pending := false
		for _, d := range g.deliveries(t) {
			if d.ChargeID == chargeID {
				mine = append(mine, d)
				pending = pending || d.Status == "pending"
			}
		}
		if !pending || time.Now().After(deadline) {
			return mine
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (g *testGateway) mustCharge(t *testing.T, k, card string) fakegateway.Charge {
	t.Helper()
	r := g.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(2500, card, "ord_"+k), key(k))
	if r.Status != http.StatusCreated && r.Status != http.StatusPaymentRequired {
		t.Fatalf("charge: got %d %s", r.Status, r.Body)
	}
	var ch fakegateway.Charge
	r.decode(t, &ch)
	return ch
}

func TestWebhooks(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		g := mustGateway(t, dialect)

		t.Run("SignedAndInOrder", func(t *testing.T) {
			ch := g.mustCharge(t, "w-ok", cardOK)
			got := g.hooks.forCharge(t, ch.ID, 2)
			if types(got) != "charge.pending,charge.succeeded" {
				t.Errorf("got %s, want charge.pending,charge.succeeded", types(got))
			}
			for _, m := range got {
				if m.ID != m.Event.ID || !strings.HasPrefix(m.ID, "evt_") {
					t.Errorf("webhook-id %q, event id %q: want the same evt_ id", m.ID, m.Event.ID)
				}
			}
			if got[0].Event.Data.Charge.Status != "pending" || got[1].Event.Data.Charge.Status != "succeeded" {
				t.Errorf("charge status in events: got %s, %s", got[0].Event.Data.Charge.Status, got[1].Event.Data.Charge.Status)
			}
			for _, d := range g.deliveriesOf(t, ch.ID) {
				if d.Status != "delivered" || len(d.Attempts) != 1 || d.Attempts[0].StatusCode != http.StatusNoContent {
					t.Errorf("delivery %d: got %s with %+v, want delivered on the first attempt", d.ID, d.Status, d.Attempts)
				}
			}
		})
		t.Run("Declined", func(t *testing.T) {
			ch := g.mustCharge(t, "w-declined", cardDeclined)
			if got := g.hooks.forCharge(t, ch.ID, 2); types(got) != "charge.pending,charge.failed" {
				t.Errorf("got %s, want charge.pending,charge.failed", types(got))
			}
		})
		t.Run("Refunded", func(t *testing.T) {
			ch := g.mustCharge(t, "w-refund", cardOK)
			g.mustDo(t, http.MethodPost, "/v1/charges/"+ch.ID+"/refunds", "{}", nil)
			// Webhooks carry no ordering guarantee (the refund's event may overtake the charge's
			// while the sender works on several deliveries), so look for it among the three.
			got := g.hooks.forCharge(t, ch.ID, 3)
			refunded := false
			for _, m := range got {
				refunded = refunded || (m.Type == "charge.refunded" && m.Event.Data.Charge.Status == "refunded")
			}
			if !refunded {
				t.Errorf("got %s, want a charge.refunded event with the refunded charge", types(got))
			}
		})
		t.Run("TamperedBodyRejected", func(t *testing.T) {
			ch := g.mustCharge(t, "w-tamper", cardOK)
			m := g.hooks.forCharge(t, ch.ID, 2)[1]
			v, _ := payments.NewWebhookVerifier(fakegateway.DemoWebhookSecret)
			h := http.Header{}
			h.Set("webhook-id", m.ID)
			h.Set("webhook-timestamp", m.Timestamp)
			h.Set("webhook-signature", m.Signature)
			if err := v.Verify(m.Body, h); err != nil {
				t.Fatalf("untouched message: got %v, want nil", err)
			}
			tampered := bytes.Replace(m.Body, []byte(`"amount":2500`), []byte(`"amount":1`), 1)
			if bytes.Equal(tampered, m.Body) {
				t.Fatal("test did not tamper with the body")
			}
			if err := v.Verify(tampered, h); !errors.Is(err, payments.ErrWebhookBadSignature) {
				t.Errorf("tampered body: got %v, want ErrWebhookBadSignature", err)
			}
		})
		t.Run("RetriesUntil2xx", func(t *testing.T) {
			g.hooks.mu.Lock()
			g.hooks.statuses = []int{500, 503}
			g.hooks.mu.Unlock()
			ch := g.mustCharge(t, "w-retry", cardOK)
			g.hooks.forCharge(t, ch.ID, 2)
			attempts := 0
			var codes []int
			for _, d := range g.deliveriesOf(t, ch.ID) {
				if d.Status != "delivered" {
					t.Errorf("delivery %d: got %s, want delivered", d.ID, d.Status)
				}
				attempts += len(d.Attempts)
				for _, a := range d.Attempts {
					codes = append(codes, a.StatusCode)
				}
			}
			if attempts != 4 {
				t.Errorf("got %d attempts (%v), want 4: two failures, two successes", attempts, codes)
			}
		})
		t.Run("GivesUpAfterMaxAttempts", func(t *testing.T) {
			g.hooks.mu.Lock()
			g.hooks.statuses = []int{500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500}
			g.hooks.mu.Unlock()
			ch := g.mustCharge(t, "w-giveup", cardOK)
			ds := g.deliveriesOf(t, ch.ID)
			g.hooks.mu.Lock()
			g.hooks.statuses = nil
			g.hooks.mu.Unlock()
			for _, d := range ds {
				if d.Status != "failed" || len(d.Attempts) != 10 || d.LastError == "" {
					t.Errorf("delivery %d: got %s after %d attempts, want failed after 10", d.ID, d.Status, len(d.Attempts))
				}
			}
		})
		t.Run("Duplicate", func(t *testing.T) {
			g.mustArm(t, map[string]any{"fault": "webhook_duplicate", "copies": 2})
			ch := g.mustCharge(t, "w-dup", cardOK)
			got := g.hooks.forCharge(t, ch.ID, 4)
			ids := map[string]int{}
			for _, m := range got {
				ids[m.ID]++
			}
			if len(ids) != 2 {
				t.Errorf("got %v, want two events delivered twice each under the same webhook-id", ids)
			}
			for id, n := range ids {
				if n != 2 {
					t.Errorf("event %s delivered %d times, want 2", id, n)
				}
			}
		})
		t.Run("CardDuplicate", func(t *testing.T) {
			ch := g.mustCharge(t, "w-dup-card", cardDuplicate)
			g.hooks.forCharge(t, ch.ID, 6)
		})
		t.Run("Reorder", func(t *testing.T) {
			g.mustArm(t, map[string]any{"fault": "webhook_reorder"})
			ch := g.mustCharge(t, "w-reorder", cardOK)
			if got := g.hooks.forCharge(t, ch.ID, 2); types(got) != "charge.succeeded,charge.pending" {
				t.Errorf("got %s, want charge.succeeded,charge.pending", types(got))
			}
		})
		t.Run("CardReorder", func(t *testing.T) {
			ch := g.mustCharge(t, "w-reorder-card", cardReorder)
			if got := g.hooks.forCharge(t, ch.ID, 2); types(got) != "charge.succeeded,charge.pending" {
				t.Errorf("got %s, want charge.succeeded,charge.pending", types(got))
			}
		})
		t.Run("Delay", func(t *testing.T) {
			const delay = 300 * time.Millisecond
			g.mustArm(t, map[string]any{"fault": "webhook_delay", "delay_ms": delay.Milliseconds()})
			ch := g.mustCharge(t, "w-delay", cardOK)
			g.hooks.forCharge(t, ch.ID, 2)
			for _, d := range g.deliveriesOf(t, ch.ID) {
				if len(d.Attempts) == 0 {
					t.Fatalf("delivery %d has no attempt", d.ID)
				}
				if waited := d.Attempts[0].At.Sub(d.Created); waited < delay {
					t.Errorf("delivery %d: first attempt %v after the charge, want at least %v", d.ID, waited, delay)
				}
			}
		})
		t.Run("Fail", func(t *testing.T) {
			g.mustArm(t, map[string]any{"fault": "webhook_fail", "times": 3})
			ch := g.mustCharge(t, "w-fail", cardOK)
			g.hooks.forCharge(t, ch.ID, 2)
			failed := 0
			for _, d := range g.deliveriesOf(t, ch.ID) {
				for _, a := range d.Attempts {
					if strings.Contains(a.Error, "webhook_fail") && a.StatusCode == 0 {
						failed++
					}
				}
				if d.Status != "delivered" {
					t.Errorf("delivery %d: got %s, want delivered in the end", d.ID, d.Status)
				}
			}
			if failed != 3 {
				t.Errorf("got %d failed attempts, want 3", failed)
			}
		})
		t.Run("Resend", func(t *testing.T) {
			ch := g.mustCharge(t, "w-resend", cardOK)
			first := g.hooks.forCharge(t, ch.ID, 2)[1]
			r := g.mustDo(t, http.MethodPost, "/_control/events/"+first.ID+"/resend", nil, nil)
			if r.Status != http.StatusAccepted {
				t.Fatalf("resend: got %d %s, want 202", r.Status, r.Body)
			}
			again := g.hooks.forCharge(t, ch.ID, 3)[2]
			if again.ID != first.ID || !bytes.Equal(again.Body, first.Body) {
				t.Errorf("resend: got %s %s, want the same id and body as %s", again.ID, again.Body, first.ID)
			}
			if r := g.mustDo(t, http.MethodPost, "/_control/events/evt_nope/resend", nil, nil); r.Status != http.StatusNotFound {
				t.Errorf("resend of an unknown event: got %d, want 404", r.Status)
			}
		})
	})
}

func TestRestart(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		s := mustStore(t, dialect)
		hooks := newReceiver(t)
		first := mustGatewayOn(t, s, hooks, noSender)
		ch := first.mustCharge(t, "restart-1", cardOK)
		first.mustArm(t, map[string]any{"fault": "decline", "times": 2})
		_ = first.gw.Close()

		second := mustGatewayOn(t, s, hooks)
		ledger := second.ledger(t)
		if len(ledger) != 1 || ledger[0].ID != ch.ID {
			t.Fatalf("ledger after restart: got %+v, want [%s]", ledger, ch.ID)
		}
		// The deliveries written before the restart are sent by the new process.
		if got := hooks.forCharge(t, ch.ID, 2); types(got) != "charge.pending,charge.succeeded" {
			t.Errorf("got %s, want charge.pending,charge.succeeded", types(got))
		}
		// So is the idempotency key, and the armed fault.
		r := second.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(2500, cardOK, "ord_restart-1"), key("restart-1"))
		var replay fakegateway.Charge
		r.decode(t, &replay)
		if replay.ID != ch.ID {
			t.Errorf("replay after restart: got %s, want %s", replay.ID, ch.ID)
		}
		var faults fakegateway.FaultList
		second.mustDo(t, http.MethodGet, "/_control/faults", nil, nil).decode(t, &faults)
		if len(faults.Faults) != 1 || faults.Faults[0].Remaining != 2 {
			t.Errorf("faults after restart: got %+v, want decline with 2 remaining", faults.Faults)
		}
	})
}
