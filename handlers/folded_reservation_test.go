package handlers_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"checkoutlab/handlers"
	"checkoutlab/handlers/idempotency"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
)

// These tests are about what the folded reservation (the key's INSERT in the operation's first
// transaction) and the lab's true baseline cost and still guarantee, on the API's checkout.

// checkoutStack is the real router with the checkout API, the payment operations on a real
// fake gateway, and a database whose COMMITs are counted.
type checkoutStack struct {
	e       http.Handler
	db      *gorm.DB
	gateway *payments.GatewayClient
	commits *commitCounter
}

// mustCheckoutStack wires the checkout as cmd/shop does, with store as the key reserver
// (nil: the shop's own, models.IdempotencyStore).
func mustCheckoutStack(tb testing.TB, db *gorm.DB, store func(*models.IdempotencyStore) idempotency.Store) *checkoutStack {
	tb.Helper()
	modelstest.MustSeed(tb, db)
	commits := countCommits(db)
	reg := prometheus.NewRegistry()
	e := handlers.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	keys := models.NewIdempotencyStore(db)
	var reserver idempotency.Store = keys
	if store != nil {
		reserver = store(keys)
	}
	gateway := MustGatewayClient(tb)
	journal := models.NewJournalStore(db, nil)
	service := &payments.Service{DB: db, Gateway: gateway, Outbox: noOutbox{}, Render: handlers.RenderOperation, Journal: journal}
	api := e.Group("/api/v1", handlers.APIKeyAuth(models.NewTenantStore(db)))
	(&handlers.PaymentsAPI{Ops: service, Cards: handlers.NewCardFingerprint([]byte("test shop secret, 32 bytes long!")),
		Idempotency: MustIdempotency(reserver, 5*time.Second, idempotency.NewMetrics(reg), journal)}).Routes(api)
	(&handlers.OrdersAPI{Orders: models.NewOrderStore(db),
		Idempotency: MustIdempotency(reserver, 5*time.Second, nil, journal)}).Routes(api)
	return &checkoutStack{e: e, db: db, gateway: gateway, commits: commits}
}

const checkoutJSON = `{"items":[{"sku":"camp-mug","quantity":2}],"email":"ada@example.com",` +
	`"shipping_address":{"name":"Ada Lovelace","address":"1 Analytical Way","city":"London","postal_code":"N1 9GU","country":"GB"},` +
	`"card_number":"4242424242424242"}`

// post sends body to path with the acme API key and key as Idempotency-Key ("" for none).
func (s *checkoutStack) post(path, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk_test_acme")
	if key != "" {
		req.Header.Set(idempotency.HeaderKey, key)
	}
	rec := httptest.NewRecorder()
	s.e.ServeHTTP(rec, req)
	return rec
}

// succeededCharges counts the gateway's succeeded charges of every payment in the database.
func (s *checkoutStack) succeededCharges(tb testing.TB) int {
	tb.Helper()
	var pays []models.Payment
	if err := s.db.Find(&pays).Error; err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, p := range pays {
		charges, err := s.gateway.FindCharges(context.Background(), p.GatewayKey)
		if err != nil {
			tb.Fatal(err)
		}
		for _, c := range charges {
			if c.Status == "succeeded" {
				n++
			}
		}
	}
	return n
}

// TestCheckoutTwentyOnOneFreshKey: twenty goroutines send one checkout with one fresh key at
// once and retry on 409 (as a client must) until they get an answer. Several of them may read
// the key absent and start; the unique index lets exactly one INSERT commit. Exactly one 201,
// nineteen replays of it, one order, one charge.
func TestCheckoutTwentyOnOneFreshKey(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		s := mustCheckoutStack(t, db, nil)
		start := make(chan struct{})
		answers := make(chan *httptest.ResponseRecorder, 20)
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range 400 {
					rec := s.post("/api/v1/checkout", "twenty", checkoutJSON)
					if rec.Code != http.StatusConflict {
						answers <- rec
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
				t.Errorf("still 409 after 400 tries")
			}()
		}
		close(start)
		wg.Wait()
		close(answers)
		fresh, replays := 0, 0
		var body string
		for rec := range answers {
			if rec.Code != http.StatusCreated {
				t.Fatalf("got %d %s, want 201", rec.Code, rec.Body)
			}
			if body == "" {
				body = rec.Body.String()
			} else if rec.Body.String() != body {
				t.Errorf("two different answers under one key:\n%s\n%s", body, rec.Body)
			}
			if rec.Header().Get(idempotency.HeaderReplayed) == "true" {
				replays++
			} else {
				fresh++
			}
		}
		if fresh != 1 || replays != 19 {
			t.Errorf("got %d fresh answers and %d replays, want 1 and 19", fresh, replays)
		}
		MustCountOrders(t, db, 1)
		if n := MustCount(t, db, &models.Payment{}); n != 1 {
			t.Errorf("got %d payments, want 1", n)
		}
		if n := s.succeededCharges(t); n != 1 {
			t.Errorf("got %d succeeded charges, want 1", n)
		}
	})
}

// TestUnprotectedWritesNoKey: with server_idempotency off (the lab's true baseline) the header
// is optional and ignored; nothing is read or written of a key — no idempotency_keys row, no
// reservation or disposition journal row — and a retry with the same key is a second order,
// charged again: the double charge the lab shows.
func TestUnprotectedWritesNoKey(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		s := mustCheckoutStack(t, db, func(keys *models.IdempotencyStore) idempotency.Store {
			return payments.Protections{Off: payments.SwitchServerIdempotency}.Reserver(keys)
		})
		for _, key := range []string{"", "same", "same"} {
			if rec := s.post("/api/v1/checkout", key, checkoutJSON); rec.Code != http.StatusCreated ||
				rec.Header().Get(idempotency.HeaderReplayed) != "" {
				t.Fatalf("key %q: got %d %s (replayed %q), want a fresh 201", key, rec.Code, rec.Body, rec.Header().Get(idempotency.HeaderReplayed))
			}
		}
		if rec := s.post("/api/v1/orders", "", orderBody); rec.Code != http.StatusCreated {
			t.Fatalf("order without a key: got %d %s, want 201", rec.Code, rec.Body)
		}
		MustCountOrders(t, db, 4)
		if n := s.succeededCharges(t); n != 3 {
			t.Errorf("got %d succeeded charges, want 3 (the retry charged again)", n)
		}
		if n := countKeys(t, db); n != 0 {
			t.Errorf("got %d idempotency_keys rows, want none", n)
		}
		var keyRows int64
		db.Model(&models.JournalEvent{}).Where("kind IN ?", []string{models.JournalReservation, models.JournalDisposition}).Count(&keyRows)
		if keyRows != 0 {
			t.Errorf("got %d reservation/disposition journal rows, want none", keyRows)
		}
	})
}

// TestFreshKeyCommits counts the shop's write commits (COMMITs of transactions that wrote, and
// write statements outside a transaction, each its own commit) of one request with a fresh
// key: a POST /api/v1/orders commits once — the key rides in the order's transaction — and a
// checkout twice on its critical path (the first phase with the key, the finish); the
// journal's own batches are written later by its background writer, which these tests do not
// run, so Record writes at once and is not on this count. Run with -v to see the figures.
func TestFreshKeyCommits(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		s := mustCheckoutStack(t, db, nil)
		s.commits.journalQueued(db)

		s.commits.reset()
		if rec := s.post("/api/v1/orders", "one-order", orderBody); rec.Code != http.StatusCreated {
			t.Fatalf("order: got %d %s", rec.Code, rec.Body)
		}
		orderCommits, orderWrites := s.commits.get()
		t.Logf("POST /api/v1/orders, fresh key: %d write commits, %d write statements; in all %s", orderCommits, orderWrites, s.commits.statements())
		if orderCommits != 1 {
			t.Errorf("POST /api/v1/orders: got %d write commits, want 1", orderCommits)
		}

		s.commits.reset()
		if rec := s.post("/api/v1/checkout", "one-checkout", checkoutJSON); rec.Code != http.StatusCreated {
			t.Fatalf("checkout: got %d %s", rec.Code, rec.Body)
		}
		checkoutCommits, checkoutWrites := s.commits.get()
		t.Logf("POST /api/v1/checkout, fresh key: %d write commits, %d write statements; in all %s", checkoutCommits, checkoutWrites, s.commits.statements())
		if checkoutCommits != 2 {
			t.Errorf("POST /api/v1/checkout: got %d write commits, want 2", checkoutCommits)
		}

		s.commits.reset()
		if rec := s.post("/api/v1/checkout", "one-checkout", checkoutJSON); rec.Header().Get(idempotency.HeaderReplayed) != "true" {
			t.Fatalf("replay: got %d %s", rec.Code, rec.Body)
		}
		replayCommits, _ := s.commits.get()
		t.Logf("replay: %d write commits; in all %s", replayCommits, s.commits.statements())
		if replayCommits != 0 {
			t.Errorf("replay: got %d write commits, want 0", replayCommits)
		}
	})
}

// commitCounter counts write commits on a database: it wraps the database's connection pool,
// so every statement and every transaction goes through it. A transaction counts when it
// commits after at least one INSERT, UPDATE or DELETE; a write statement outside a
// transaction counts as a commit of its own (autocommit). Reads never count.
type commitCounter struct {
	commits, writes atomic.Int64
	// inserts, updates and selects count every statement by its verb, in a transaction or
	// not, the journal's own included: figures for the report, not for assertions.
	inserts, updates, selects atomic.Int64
	// skipJournal leaves out the journal's own best-effort writes (JournalStore.Record), which
	// the shop queues and writes in batches off the request's path.
	skipJournal atomic.Bool
}

func (c *commitCounter) reset() {
	for _, n := range []*atomic.Int64{&c.commits, &c.writes, &c.inserts, &c.updates, &c.selects} {
		n.Store(0)
	}
}

// statements says how many SELECTs, INSERTs and UPDATEs ran since the last reset.
func (c *commitCounter) statements() string {
	return fmt.Sprintf("%d SELECT, %d INSERT, %d UPDATE", c.selects.Load(), c.inserts.Load(), c.updates.Load())
}

// verb counts query by its first word.
func (c *commitCounter) verb(query string) {
	q := strings.ToUpper(strings.TrimSpace(query))
	switch {
	case strings.HasPrefix(q, "SELECT"):
		c.selects.Add(1)
	case strings.HasPrefix(q, "INSERT"):
		c.inserts.Add(1)
	case strings.HasPrefix(q, "UPDATE"):
		c.updates.Add(1)
	}
}
func (c *commitCounter) get() (int64, int64) { return c.commits.Load(), c.writes.Load() }

// journalQueued makes the counter leave the journal's out-of-transaction writes out.
func (c *commitCounter) journalQueued(*gorm.DB) { c.skipJournal.Store(true) }

// countCommits wraps db's pool with a counter, for every session made from db from now on.
func countCommits(db *gorm.DB) *commitCounter {
	c := &commitCounter{}
	pool := &countingPool{ConnPool: db.ConnPool, counter: c}
	db.ConnPool = pool
	db.Statement.ConnPool = pool
	return c
}

func isWrite(query string) bool {
	q := strings.ToUpper(strings.TrimSpace(query))
	return strings.HasPrefix(q, "INSERT") || strings.HasPrefix(q, "UPDATE") || strings.HasPrefix(q, "DELETE")
}

func isJournal(query string) bool { return strings.Contains(query, "journal_events") }

type countingPool struct {
	gorm.ConnPool
	counter *commitCounter
}

func (p *countingPool) note(query string) {
	p.counter.verb(query)
	if isWrite(query) && !(p.counter.skipJournal.Load() && isJournal(query)) {
		p.counter.writes.Add(1)
		p.counter.commits.Add(1)
	}
}

func (p *countingPool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	p.note(query)
	return p.ConnPool.ExecContext(ctx, query, args...)
}

func (p *countingPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	p.note(query)
	return p.ConnPool.QueryContext(ctx, query, args...)
}

func (p *countingPool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	p.note(query)
	return p.ConnPool.QueryRowContext(ctx, query, args...)
}

// BeginTx makes GORM's transactions go through countingTx (gorm.ConnPoolBeginner).
func (p *countingPool) BeginTx(ctx context.Context, opts *sql.TxOptions) (gorm.ConnPool, error) {
	tx, err := p.ConnPool.(gorm.TxBeginner).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &countingTx{Tx: tx, counter: p.counter}, nil
}

// GetDBConn lets db.DB() find the *sql.DB underneath (gorm.GetDBConnector).
func (p *countingPool) GetDBConn() (*sql.DB, error) {
	if sqlDB, ok := p.ConnPool.(*sql.DB); ok {
		return sqlDB, nil
	}
	return p.ConnPool.(gorm.GetDBConnector).GetDBConn()
}

type countingTx struct {
	*sql.Tx
	counter *commitCounter
	writes  int64
}

func (t *countingTx) note(query string) {
	t.counter.verb(query)
	if isWrite(query) {
		t.writes++
	}
}

func (t *countingTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	t.note(query)
	return t.Tx.ExecContext(ctx, query, args...)
}

func (t *countingTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	t.note(query)
	return t.Tx.QueryContext(ctx, query, args...)
}

func (t *countingTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	t.note(query)
	return t.Tx.QueryRowContext(ctx, query, args...)
}

func (t *countingTx) Commit() error {
	err := t.Tx.Commit()
	if err == nil && t.writes > 0 {
		t.counter.commits.Add(1)
		t.counter.writes.Add(t.writes)
	}
	return err
}

// TestAnswerFromHeldRows: the finish renders the answer from the order and payment the
// operation wrote, with the settlement applied, instead of reading them back. That answer must
// be exactly what rendering the rows as the database now has them gives — what the completer
// or a resumed request, which hold nothing, would store. Checked for a decline (402), and for
// paying that order again with another card (201, the order's second payment).
func TestAnswerFromHeldRows(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		s := mustCheckoutStack(t, db, nil)
		declined := s.post("/api/v1/checkout", "held-1", strings.Replace(checkoutJSON, "4242424242424242", "4000000000000002", 1))
		if declined.Code != http.StatusPaymentRequired {
			t.Fatalf("declined checkout: got %d %s, want 402", declined.Code, declined.Body)
		}
		var pays []models.Payment
		db.Find(&pays)
		if len(pays) != 1 {
			t.Fatalf("got %d payments, want 1", len(pays))
		}
		mustRenderAsStored(t, db, payments.OperationCheckout, pays[0].ID, declined)

		var o models.Order
		db.Take(&o)
		body := `{"order_id":"` + o.ID + `","amount":` + strconv.FormatInt(o.Amount, 10) + `,"currency":"` + o.Currency +
			`","card_number":"4242424242424242"}`
		paid := s.post("/api/v1/payments", "held-2", body)
		if paid.Code != http.StatusCreated {
			t.Fatalf("payment: got %d %s, want 201", paid.Code, paid.Body)
		}
		var second models.Payment
		db.Where("id <> ?", pays[0].ID).Take(&second)
		mustRenderAsStored(t, db, payments.OperationPayment, second.ID, paid)

		checkout := s.post("/api/v1/checkout", "held-3", checkoutJSON)
		var third models.Payment
		db.Where("id NOT IN ?", []string{pays[0].ID, second.ID}).Take(&third)
		mustRenderAsStored(t, db, payments.OperationCheckout, third.ID, checkout)
	})
}

// mustRenderAsStored renders op's answer for payment paymentID from the database and compares
// it with got, the answer the request received.
func mustRenderAsStored(tb testing.TB, db *gorm.DB, op payments.Operation, paymentID string, got *httptest.ResponseRecorder) {
	tb.Helper()
	pay, err := models.NewPaymentStore(db).Get(context.Background(), paymentID)
	if err != nil {
		tb.Fatal(err)
	}
	order, err := models.NewOrderStore(db).Get(context.Background(), pay.TenantID, pay.OrderID)
	if err != nil {
		tb.Fatal(err)
	}
	out := payments.Result{Operation: op, Order: order, Payment: pay}
	if pay.Status == models.PaymentFailed {
		out.Err = payments.Declined(pay.DeclineCode)
	}
	want, err := handlers.RenderOperation(out)
	if err != nil {
		tb.Fatal(err)
	}
	if got.Code != want.Status || got.Body.String() != string(want.Body) {
		tb.Errorf("answer rendered from the held rows differs from the rows read back:\ngot  %d %s\nwant %d %s",
			got.Code, got.Body, want.Status, want.Body)
	}
}
