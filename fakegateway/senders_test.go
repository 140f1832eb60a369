package fakegateway_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"checkoutlab/fakegateway"
	"checkoutlab/models/modelstest"
)

// countingReceiver is a webhook endpoint that counts what it accepts, per webhook-id and in
// arrival order, and how many TCP connections the senders opened to it. delay stands for the
// shop's own work per webhook.
type countingReceiver struct {
	srv   *httptest.Server
	conns atomic.Int64
	delay time.Duration

	mu          sync.Mutex
	byID        map[string]int
	arrived     []arrival
	total       int
	first, last time.Time // when the first and the latest webhook arrived
}

type arrival struct{ chargeID, eventType string }

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

func newCountingReceiver(tb testing.TB, delay time.Duration) *countingReceiver {
	tb.Helper()
	r := &countingReceiver{delay: delay, byID: map[string]int{}}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	r.srv.Listener = countingListener{Listener: r.srv.Listener, accepted: &r.conns}
	r.srv.Start()
	tb.Cleanup(r.srv.Close)
	return r
}

func (r *countingReceiver) serve(w http.ResponseWriter, req *http.Request) {
	var ev fakegateway.Event
	_ = json.NewDecoder(req.Body).Decode(&ev)
	time.Sleep(r.delay)
	r.mu.Lock()
	r.byID[req.Header.Get("webhook-id")]++
	r.arrived = append(r.arrived, arrival{ev.Data.Charge.ID, ev.Type})
	r.total++
	if r.first.IsZero() {
		r.first = time.Now()
	}
	r.last = time.Now()
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *countingReceiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// backlog is a gateway database holding pending deliveries that no sender has touched:
// charges*2 events (charge.pending, charge.succeeded), each to be delivered copies times.
func backlog(t testing.TB, dialect string, charges, copies int) store {
	t.Helper()
	s := mustStore(t, dialect)
	producer := mustGatewayOn(t, s, newReceiver(t), noSender)
	producer.mustArm(t, map[string]any{"fault": "webhook_duplicate", "copies": copies, "times": charges})
	for i := range charges {
		k := fmt.Sprintf("backlog-%d", i)
		if r := producer.mustDo(t, http.MethodPost, "/v1/charges", chargeBody(2500, cardOK, "ord_"+k), key(k)); r.Status != http.StatusCreated {
			t.Fatalf("charge: got %d %s", r.Status, r.Body)
		}
	}
	return s
}

// drain starts instances gateways with senders senders each on s, as that many gateway
// processes on one database would run, and waits until the receiver has had want webhooks.
// It returns how long they took from the first to the last, which leaves out the gateways'
// start (opening and migrating the database).
func drain(t testing.TB, s store, hooks *countingReceiver, instances, senders, want int) time.Duration {
	t.Helper()
	for range instances {
		mustGatewayOn(t, s, newReceiver(t), func(c *fakegateway.Config) {
			c.WebhookURL = hooks.srv.URL + "/webhooks/gateway"
			c.Senders = senders
		})
	}
	for deadline := time.Now().Add(waitFor); hooks.count() < want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: got %d webhooks, want %d", waitFor, hooks.count(), want)
		}
	}
	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	return hooks.last.Sub(hooks.first)
}

// TestSendersDeliverEachAttemptOnce: a backlog of 500 deliveries drained by several senders —
// in two gateway processes on one database, then in one — reaches the receiver exactly once
// per delivery: none lost, none claimed twice. Within one process a charge's deliveries keep
// their order, and the senders reuse their connections.
func TestSendersDeliverEachAttemptOnce(t *testing.T) {
	const charges, copies = 25, 10 // 25 charges × 2 events × 10 copies = 500 deliveries
	const want = charges * 2 * copies
	forEachDialect(t, func(t *testing.T, dialect string) {
		for _, tc := range []struct {
			name               string
			instances, senders int
		}{
			{"TwoProcesses", 2, 4},
			{"OneProcess", 1, 8},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s := backlog(t, dialect, charges, copies)
				hooks := newCountingReceiver(t, 0)
				took := drain(t, s, hooks, tc.instances, tc.senders, want)
				t.Logf("%s: %d deliveries in %v with %d×%d senders (%.0f/s)", dialect, want, took,
					tc.instances, tc.senders, float64(want-1)/took.Seconds())

				db := s.mustOpen(t)
				var pending int64
				for deadline := time.Now().Add(waitFor); ; time.Sleep(10 * time.Millisecond) {
					if err := db.Table("gw_deliveries").Where("status = 'pending' OR claimed_by <> ''").Count(&pending).Error; err != nil {
						t.Fatal(err)
					}
					if pending == 0 || time.Now().After(deadline) {
						break
					}
				}
				var delivered, attempts int64
				if err := db.Table("gw_deliveries").Where("status = 'delivered' AND attempts = 1").Count(&delivered).Error; err != nil {
					t.Fatal(err)
				}
				if err := db.Table("gw_delivery_attempts").Count(&attempts).Error; err != nil {
					t.Fatal(err)
				}
				if pending != 0 || delivered != want || attempts != want {
					t.Errorf("got %d still pending or claimed, %d delivered on one attempt, %d attempts; want 0, %d, %d",
						pending, delivered, attempts, want, want)
				}

				hooks.mu.Lock()
				defer hooks.mu.Unlock()
				if hooks.total != want || len(hooks.byID) != charges*2 {
					t.Errorf("receiver got %d webhooks of %d events, want %d of %d", hooks.total, len(hooks.byID), want, charges*2)
				}
				for id, n := range hooks.byID {
					if n != copies {
						t.Errorf("event %s arrived %d times, want %d (its copies)", id, n, copies)
					}
				}
				// A sender keeps its connection. It may open a second one now and then: a
				// connection goes back to the pool just after its answer has been read, and a
				// sender that is quicker than that dials anew (the pool keeps one per sender,
				// closing the spare). http.DefaultTransport keeps 2 per host, closing the rest.
				if opened, most := hooks.conns.Load(), int64(2*tc.instances*tc.senders); opened > most {
					t.Errorf("senders opened %d connections to the receiver, want at most %d (about one per sender)", opened, most)
				}
				if tc.instances == 1 {
					mustKeepChargeOrder(t, hooks.arrived)
				}
			})
		}
	})
}

// mustKeepChargeOrder checks that every charge's charge.pending copies all arrived before its
// first charge.succeeded: the deliveries of one charge are sent one after the other.
func mustKeepChargeOrder(t *testing.T, arrived []arrival) {
	t.Helper()
	succeeded := map[string]bool{}
	for i, a := range arrived {
		switch a.eventType {
		case "charge.succeeded":
			succeeded[a.chargeID] = true
		case "charge.pending":
			if succeeded[a.chargeID] {
				t.Fatalf("webhook %d: charge.pending of %s after its charge.succeeded", i, a.chargeID)
			}
		}
	}
}

// BenchmarkSendersDrain measures deliveries per second with 1 and with DefaultSenders senders,
// to a receiver that takes 2 ms per webhook (about what the shop's handler takes):
//
//	CI=true go test ./fakegateway -run '^$' -bench SendersDrain -benchtime 3x
func BenchmarkSendersDrain(b *testing.B) {
	const charges, copies = 25, 4 // 200 deliveries
	const want = charges * 2 * copies
	for _, dialect := range modelstest.Dialects {
		for _, senders := range []int{1, fakegateway.DefaultSenders} {
			b.Run(fmt.Sprintf("%s/senders=%d", dialect, senders), func(b *testing.B) {
				var total time.Duration
				for range b.N {
					b.StopTimer()
					s := backlog(b, dialect, charges, copies)
					hooks := newCountingReceiver(b, 2*time.Millisecond)
					b.StartTimer()
					total += drain(b, s, hooks, 1, senders, want)
				}
				b.ReportMetric(float64((want-1)*b.N)/total.Seconds(), "deliveries/s")
			})
		}
	}
}

// TestSendersTakeOverExpiredClaims: deliveries claimed by a process that died are sent once
// their claim has run out; deliveries another live process holds are left to it.
func TestSendersTakeOverExpiredClaims(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		s := backlog(t, dialect, 2, 2) // 8 deliveries
		db := s.mustOpen(t)
		var ids []int64
		if err := db.Table("gw_deliveries").Order("id").Pluck("id", &ids).Error; err != nil || len(ids) != 8 {
			t.Fatalf("got deliveries %v (%v), want 8", ids, err)
		}
		now := time.Now().UTC()
		claim := func(ids []int64, by string, until time.Time) {
			t.Helper()
			if err := db.Table("gw_deliveries").Where("id IN ?", ids).
				Updates(map[string]any{"claimed_by": by, "claimed_until": until}).Error; err != nil {
				t.Fatal(err)
			}
		}
		claim(ids[:3], "snd_dead", now.Add(-time.Second))
		claim(ids[3:5], "snd_alive", now.Add(time.Hour))

		hooks := newCountingReceiver(t, 0)
		drain(t, s, hooks, 1, 4, 6)            // the 3 free ones and the 3 whose claim ran out
		time.Sleep(20 * 10 * time.Millisecond) // twenty of the test gateway's poll intervals
		if got := hooks.count(); got != 6 {
			t.Errorf("got %d webhooks, want 6: the live claims are not this process's to send", got)
		}
		var held int64
		if err := db.Table("gw_deliveries").Where("status = 'pending' AND claimed_by = 'snd_alive'").Count(&held).Error; err != nil || held != 2 {
			t.Errorf("got %d deliveries still held by the live process (%v), want 2", held, err)
		}
	})
}
