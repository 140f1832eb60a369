package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"checkoutlab/handlers"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// orderList decodes a GET /api/v1/orders answer.
func orderList(tb testing.TB, rec *httptest.ResponseRecorder) []handlers.OrderOpsJSON {
	tb.Helper()
	MustStatus(tb, rec, http.StatusOK, "")
	var body struct{ Data []handlers.OrderOpsJSON }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		tb.Fatalf("decode %s: %v", rec.Body, err)
	}
	return body.Data
}

func orderIDs(os []handlers.OrderOpsJSON) []string {
	ids := []string{}
	for _, o := range os {
		ids = append(ids, o.ID)
	}
	return ids
}

// MustDeliver puts n receipts (without a dedupe key, so each one lands) and m shipment
// requests for o, as the outbox's workers would.
func MustDeliver(tb testing.TB, db *gorm.DB, o *models.Order, receipts, shipments int) {
	tb.Helper()
	ctx := context.Background()
	effects := models.NewSideEffectStore(db)
	for range receipts {
		if _, err := effects.DeliverReceipt(ctx, &models.MailboxMessage{TenantID: o.TenantID, OrderID: o.ID,
			ToAddress: o.Email, Subject: "Your order", Body: "Thank you."}); err != nil {
			tb.Fatal(err)
		}
	}
	for range shipments {
		if _, err := effects.RequestShipment(ctx, &models.Shipment{TenantID: o.TenantID, OrderID: o.ID}); err != nil {
			tb.Fatal(err)
		}
	}
}

func TestOrdersOpsList(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		a := MustAPI(t, db, 5*time.Second)
		t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		// Placed out of time order; two of them a microsecond apart (PostgreSQL's precision).
		late := modelstest.MustOrderAt(t, db, "acme", "camp-mug", t0.Add(time.Second))
		first := modelstest.MustOrderAt(t, db, "acme", "camp-mug", t0)
		half := modelstest.MustOrderAt(t, db, "acme", "headlamp", t0.Add(500*time.Millisecond))
		halfPlus := modelstest.MustOrderAt(t, db, "acme", "camp-mug", t0.Add(500*time.Millisecond+time.Microsecond))
		globex := modelstest.MustOrderAt(t, db, "globex", "paper-filters", t0.Add(2*time.Second))
		declined := modelstest.MustSettledPayment(t, db, first, models.PaymentFailed, "card_declined")
		succeeded := modelstest.MustSettledPayment(t, db, first, models.PaymentSucceeded, "")
		MustDeliver(t, db, first, 1, 1)
		MustDeliver(t, db, half, 2, 0) // a duplicate receipt, as the lab's "no dedupe" switch makes
		MustDeliver(t, db, globex, 1, 1)
		all := []string{first.ID, half.ID, halfPlus.ID, late.ID}

		t.Run("OK", func(t *testing.T) {
			got := orderList(t, a.get(t, "sk_test_acme", "/api/v1/orders"))
			if ids := orderIDs(got); !slices.Equal(ids, all) {
				t.Fatalf("orders: got %q, want %q (oldest first, acme only)", ids, all)
			}
			o := got[0]
			var pays []string
			for _, p := range o.Payments {
				pays = append(pays, p.ID+" "+p.Status+" "+p.DeclineCode)
			}
			if want := []string{declined.ID + " failed card_declined", succeeded.ID + " succeeded "}; !slices.Equal(pays, want) {
				t.Errorf("payments: got %q, want %q", pays, want)
			}
			if o.Payment == nil || o.Payment.ID != succeeded.ID || o.Status != models.OrderPaid {
				t.Errorf("payment: got %+v on a %s order, want the latest, %s, on a paid order", o.Payment, o.Status, succeeded.ID)
			}
			counts := map[string][2]int{}
			for _, o := range got {
				counts[o.ID] = [2]int{o.Receipts, o.Shipments}
			}
			want := map[string][2]int{first.ID: {1, 1}, half.ID: {2, 0}, halfPlus.ID: {0, 0}, late.ID: {0, 0}}
			if !reflect.DeepEqual(counts, want) {
				t.Errorf("receipts and shipments: got %v, want %v", counts, want)
			}
		})
		t.Run("OrderFieldsUnchanged", func(t *testing.T) {
			// Each element is GET /api/v1/orders/{id} plus the ops members, nothing changed.
			var body struct{ Data []map[string]any }
			rec := a.get(t, "sk_test_acme", "/api/v1/orders")
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			for _, el := range body.Data {
				var one map[string]any
				if err := json.Unmarshal(a.get(t, "sk_test_acme", "/api/v1/orders/"+el["id"].(string)).Body.Bytes(), &one); err != nil {
					t.Fatal(err)
				}
				for _, k := range []string{"payments", "receipts", "shipments"} {
					if _, ok := el[k]; !ok {
						t.Errorf("%s: no %q in %v", el["id"], k, el)
					}
					delete(el, k)
				}
				if !reflect.DeepEqual(el, one) {
					t.Errorf("got %v, want %v", el, one)
				}
			}
			if !strings.Contains(rec.Body.String(), `"payments":[],"receipts":0,"shipments":0`) {
				t.Errorf("an order without payments: got %s, want \"payments\":[] and zero counts", rec.Body)
			}
		})
		t.Run("CreatedAfter", func(t *testing.T) {
			for query, want := range map[string][]string{
				"2026-03-01T10:00:00Z":              all[1:],
				"2026-03-01T10:00:00.5Z":            {halfPlus.ID, late.ID}, // strictly after
				"2026-03-01T10:00:00.499999999Z":    {half.ID, halfPlus.ID, late.ID},
				"2026-03-01T10:00:00.500001Z":       {late.ID},
				"2026-03-01T12:00:00.5%2B02:00":     {halfPlus.ID, late.ID}, // another zone, + encoded
				"2026-03-01T10:00:01Z":              {},
				"2026-02-28T23:59:59.999999999Z":    all,
				"2026-03-01T10:00:00.5Z&limit=1":    {halfPlus.ID},
				"2026-03-01T09:00:00-01:00&limit=2": {half.ID, halfPlus.ID}, // 10:00 UTC
			} {
				t.Run(query, func(t *testing.T) {
					got := orderList(t, a.get(t, "sk_test_acme", "/api/v1/orders?created_after="+query))
					if ids := orderIDs(got); !slices.Equal(ids, want) {
						t.Errorf("got %q, want %q", ids, want)
					}
				})
			}
		})
		t.Run("Limit", func(t *testing.T) {
			for query, want := range map[string][]string{"1": all[:1], "3": all[:3], "500": all} {
				got := orderList(t, a.get(t, "sk_test_acme", "/api/v1/orders?limit="+query))
				if ids := orderIDs(got); !slices.Equal(ids, want) {
					t.Errorf("limit=%s: got %q, want %q", query, ids, want)
				}
			}
		})
		t.Run("Empty", func(t *testing.T) {
			rec := a.get(t, "sk_test_acme", "/api/v1/orders?created_after=2030-01-01T00:00:00Z")
			MustStatus(t, rec, http.StatusOK, "")
			if got, want := rec.Body.String(), "{\"data\":[]}\n"; got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
		t.Run("OtherTenant", func(t *testing.T) {
			got := orderList(t, a.get(t, "sk_test_globex", "/api/v1/orders"))
			if ids := orderIDs(got); !slices.Equal(ids, []string{globex.ID}) {
				t.Fatalf("got %q, want only globex's %s", ids, globex.ID)
			}
			if got[0].Currency != "EUR" || got[0].Receipts != 1 || got[0].Shipments != 1 || len(got[0].Payments) != 0 {
				t.Errorf("got %+v, want a EUR order with 1 receipt, 1 shipment and no payment", got[0])
			}
		})
		t.Run("ErrUnauthorized", func(t *testing.T) {
			MustStatus(t, a.get(t, "nope", "/api/v1/orders"), http.StatusUnauthorized, "unauthorized")
		})
		t.Run("ErrInvalidRequest", func(t *testing.T) {
			keys := countKeys(t, db)
			for query, bad := range map[string][]string{
				"created_after=yesterday":                 {"created_after"},
				"created_after=":                          {"created_after"},
				"created_after=2026-03-01":                {"created_after"},
				"created_after=2026-03-01T10:00:00":       {"created_after"}, // no zone
				"created_after=2026-03-01T12:00:00+02:00": {"created_after"}, // + unencoded: a space
				"created_after=2026-13-01T10:00:00Z":      {"created_after"},
				"limit=0":                                 {"limit"},
				"limit=501":                               {"limit"},
				"limit=-1":                                {"limit"},
				"limit=1.5":                               {"limit"},
				"limit=":                                  {"limit"},
				"limit=ten":                               {"limit"},
				"created_after=now&limit=0":               {"created_after", "limit"},
				"limit=99999999999999999999999&created_after=2026-03-01T10:00:00Z": {"limit"},
			} {
				t.Run(query, func(t *testing.T) {
					rec := a.get(t, "sk_test_acme", "/api/v1/orders?"+query)
					MustStatus(t, rec, http.StatusBadRequest, "invalid_request")
					var body struct {
						Message string
						Fields  map[string]string
						Data    any
					}
					if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
						t.Fatal(err)
					}
					var got []string
					for f := range body.Fields {
						got = append(got, f)
					}
					slices.Sort(got)
					if !slices.Equal(got, bad) || body.Data != nil {
						t.Errorf("got fields %q and data %v, want fields %q and no data (body %s)", got, body.Data, bad, rec.Body)
					}
					for _, f := range bad {
						if !strings.Contains(body.Message, f) {
							t.Errorf("message %q does not name %s", body.Message, f)
						}
					}
				})
			}
			if got := countKeys(t, db); got != keys {
				t.Errorf("idempotency keys: got %d, want %d (a bad query reserves nothing)", got, keys)
			}
			MustCountOrders(t, db, 5)
		})
	})
}

func TestOrdersOpsEvents(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		a := MustAPI(t, db, 5*time.Second)
		o := modelstest.MustOrderAt(t, db, "acme", "camp-mug", time.Now())
		other := modelstest.MustOrderAt(t, db, "acme", "headlamp", time.Now())
		quiet := modelstest.MustOrderAt(t, db, "acme", "headlamp", time.Now())
		globex := modelstest.MustOrderAt(t, db, "globex", "paper-filters", time.Now())
		j := models.NewJournalStore(db, nil)
		t0 := time.Date(2026, 3, 1, 10, 0, 0, 123456000, time.UTC) // microseconds: both databases keep them
		evs := []models.JournalEvent{
			// The first reservation is written before the order exists: only the key links it.
			{TenantID: "acme", IdempotencyKey: "ev-1", Actor: models.ActorShop, Kind: models.JournalReservation, Detail: "reserved: first request", At: t0},
			{TenantID: "acme", IdempotencyKey: "ev-1", OrderID: o.ID, Actor: models.ActorDatabase, Kind: models.JournalPhase, Detail: "order_created", At: t0.Add(time.Millisecond)},
			{TenantID: "acme", OrderID: o.ID, PaymentID: "pay_1", Actor: models.ActorOutbox, Kind: models.JournalReceipt, At: t0.Add(2 * time.Second).In(time.FixedZone("CEST", 2*3600))},
			// Not this order's: another order, and the same key string under another tenant.
			{TenantID: "acme", IdempotencyKey: "ev-2", OrderID: other.ID, Actor: models.ActorShop, Kind: models.JournalReservation, Detail: "reserved", At: t0},
			{TenantID: "globex", IdempotencyKey: "ev-1", Actor: models.ActorShop, Kind: models.JournalReservation, Detail: "reserved", At: t0},
		}
		// Written newest first: the answer is in time order, not in the order of writing.
		err := db.Transaction(func(tx *gorm.DB) error {
			for _, ev := range slices.Backward(evs) {
				if err := j.RecordTx(tx, ev); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}

		t.Run("OK", func(t *testing.T) {
			rec := a.get(t, "sk_test_acme", "/api/v1/orders/"+o.ID+"/events")
			MustStatus(t, rec, http.StatusOK, "")
			want := `{"data":[` +
				`{"at":"2026-03-01T10:00:00.123456000Z","actor":"shop","kind":"reservation","idempotency_key":"ev-1","detail":"reserved: first request"},` +
				`{"at":"2026-03-01T10:00:00.124456000Z","actor":"database","kind":"phase","idempotency_key":"ev-1","order_id":"` + o.ID + `","detail":"order_created"},` +
				`{"at":"2026-03-01T10:00:02.123456000Z","actor":"outbox","kind":"receipt","order_id":"` + o.ID + `","payment_id":"pay_1"}` +
				"]}\n"
			if got := rec.Body.String(); got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
		t.Run("NoEvents", func(t *testing.T) {
			rec := a.get(t, "sk_test_acme", "/api/v1/orders/"+quiet.ID+"/events")
			MustStatus(t, rec, http.StatusOK, "")
			if got, want := rec.Body.String(), "{\"data\":[]}\n"; got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
		t.Run("ErrNotFoundOtherTenant", func(t *testing.T) {
			rec := a.get(t, "sk_test_globex", "/api/v1/orders/"+o.ID+"/events")
			MustStatus(t, rec, http.StatusNotFound, "not_found")
			if strings.Contains(rec.Body.String(), "ev-1") || strings.Contains(rec.Body.String(), "reserv") {
				t.Errorf("404 reveals the journal: %s", rec.Body)
			}
			MustStatus(t, a.get(t, "sk_test_acme", "/api/v1/orders/"+globex.ID+"/events"), http.StatusNotFound, "not_found")
		})
		t.Run("ErrNotFoundUnknown", func(t *testing.T) {
			MustStatus(t, a.get(t, "sk_test_acme", "/api/v1/orders/ord_nope/events"), http.StatusNotFound, "not_found")
		})
		t.Run("ErrUnauthorized", func(t *testing.T) {
			MustStatus(t, a.get(t, "", "/api/v1/orders/"+o.ID+"/events"), http.StatusUnauthorized, "unauthorized")
		})
		// A client replaying one key: past JournalRepeatRows rows the journal counts the
		// replays on the last row, and the answer says how many and when the last one was.
		t.Run("Repeats", func(t *testing.T) {
			replayed := modelstest.MustOrderAt(t, db, "acme", "camp-mug", time.Now())
			extra := 3
			for i := range models.JournalRepeatRows + extra {
				ev := models.JournalEvent{TenantID: "acme", IdempotencyKey: "ev-replayed", OrderID: replayed.ID,
					Actor: models.ActorShop, Kind: models.JournalReservation, Detail: "replayed: stored answer",
					At: t0.Add(time.Duration(i) * time.Second)}
				j.Record(context.Background(), ev) // without Run: written (or counted) at once
			}
			rec := a.get(t, "sk_test_acme", "/api/v1/orders/"+replayed.ID+"/events")
			MustStatus(t, rec, http.StatusOK, "")
			var body struct{ Data []handlers.JournalEventJSON }
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if len(body.Data) != models.JournalRepeatRows {
				t.Fatalf("got %d events, want %d: %s", len(body.Data), models.JournalRepeatRows, rec.Body)
			}
			last := body.Data[len(body.Data)-1]
			wantLast := t0.Add(time.Duration(models.JournalRepeatRows+extra-1) * time.Second).Format("2006-01-02T15:04:05.000000000Z07:00")
			if last.Repeats != extra || last.LastAt != wantLast {
				t.Errorf("last event: got repeats %d, last_at %q; want %d, %q", last.Repeats, last.LastAt, extra, wantLast)
			}
			if first := body.Data[0]; len(body.Data) > 1 && (first.Repeats != 0 || first.LastAt != "") {
				t.Errorf("first event: got repeats %d, last_at %q; want neither", first.Repeats, first.LastAt)
			}
		})
	})
}
