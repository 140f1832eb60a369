package labrun

import (
	"testing"
	"time"

	"checkoutlab/models"
	"checkoutlab/payments/lab"
)

// TestTimeline builds the timeline of a crash run from its evidence: the killed shop's charge
// is in the ledger only, the completer's charge has its answer in the journal. Every response
// goes back along its request, the kill is a mark, and the second charge is decisive harm.
func TestTimeline(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return at.Add(time.Duration(n) * time.Millisecond) }
	key := "run_x-crash"
	res := lab.Result{
		Timeline: []lab.Row{
			{At: ms(0), Actor: models.ActorClient, Kind: "attempt", Key: key, Detail: "sent attempt 1 with key " + key},
			{At: ms(1), Actor: models.ActorShop, Kind: models.JournalReservation, Key: key, Detail: "reserved: a new key (attempt 1)"},
			{At: ms(2), Actor: models.ActorDatabase, Kind: models.JournalPhase, Key: key, Order: "ord_1", Detail: "payment_created: …"},
			{At: ms(5), Actor: models.ActorClient, Kind: "attempt", Key: key, Detail: "no answer: the connection was lost or timed out"},
			{At: ms(5), Actor: models.ActorShop, Kind: models.JournalCrash, Key: key, Detail: "killed: the shop process died (SIGKILL)"},
			{At: ms(2000), Actor: models.ActorCompleter, Kind: models.JournalClaim, Key: key, Order: "ord_1", Detail: "claimed: abandoned at payment_created"},
			{At: ms(2003), Actor: models.ActorGateway, Kind: models.JournalGatewayCharge, Key: key, Order: "ord_1", Detail: "succeeded: charge ch_two (succeeded)"},
			{At: ms(2100), Actor: models.ActorClient, Kind: "attempt", Key: key, Detail: "sent attempt 2 with key " + key},
			{At: ms(2101), Actor: models.ActorClient, Kind: "attempt", Key: key, Detail: "answer 201"},
		},
		Ledger: []lab.Charge{
			{ID: "ch_one", Status: "succeeded", Amount: 2800, Currency: "USD", Metadata: map[string]string{"order_id": "ord_1"}},
			{ID: "ch_two", Status: "succeeded", Amount: 2800, Currency: "USD", Metadata: map[string]string{"order_id": "ord_1"}},
		},
		Deliveries: []lab.Delivery{{EventID: "evt_1", EventType: "charge.succeeded", ChargeID: "ch_one", Status: "pending", Created: ms(3)}},
	}
	events, messages := Timeline(res, 1)
	charges := map[string]lab.Event{}
	for _, ev := range events {
		if ev.Kind == "charge" {
			charges[ev.ChargeID] = ev
		}
	}
	if len(charges) != 2 {
		t.Fatalf("got charge events %v, want one per ledger charge", charges)
	}
	if one := charges["ch_one"]; one.Decisive || one.AtMS < 2 || one.AtMS > 3 || messages[one.Message].From != "shop" {
		t.Errorf("the killed shop's charge: got %+v, want the shop's request just before 3 ms (dated by its webhook), not decisive", one)
	}
	if two := charges["ch_two"]; !two.Decisive || two.Tone != "harm" || messages[two.Message].From != "jobs" {
		t.Errorf("the completer's charge: got %+v from %s, want decisive harm sent by jobs", two, messages[two.Message].From)
	}
	for i, m := range messages {
		if m.From == m.To {
			t.Errorf("message %d goes from %s to itself", i, m.From)
		}
		if m.Kind == lab.MessageResponse {
			if q := messages[m.Answers]; q.From != m.To || q.To != m.From {
				t.Errorf("response %d (%s → %s) answers %s → %s, want it back along its request", i, m.From, m.To, q.From, q.To)
			}
		}
	}
	marks := 0
	for _, ev := range events {
		if ev.Mark {
			marks++
			if ev.Message != -1 {
				t.Errorf("mark %+v is also a message", ev)
			}
		}
	}
	if marks != 3 { // the lost answer, the kill, the undelivered webhook
		t.Errorf("got %d marks, want 3", marks)
	}
}
