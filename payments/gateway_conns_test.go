package payments_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"checkoutlab/fakegateway"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments"
)

// countingListener counts the TCP connections it accepts.
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

// startCounted serves h on a loopback listener that counts its connections.
func startCounted(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var accepted atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = countingListener{Listener: srv.Listener, accepted: &accepted}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &accepted
}

// TestGatewayClientReusesConnections: sequential calls share one connection, and 8 calls at a
// time keep about 8: the client does not open a connection per call.
func TestGatewayClientReusesConnections(t *testing.T) {
	for _, dialect := range modelstest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			url := modelstest.MustDatabaseURL(t, dialect)
			dir := ""
			if url == "" {
				dir = t.TempDir()
			}
			db, err := fakegateway.OpenDB(context.Background(), url, dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { models.Close(db) })
			gw, err := fakegateway.New(fakegateway.Config{DB: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = gw.Close() })
			srv, accepted := startCounted(t, gw.Handler())

			ctx := context.Background()
			client := payments.NewGatewayClient(srv.URL, 5*time.Second)
			pm, err := client.CreatePaymentMethod(ctx, "4242424242424242")
			if err != nil {
				t.Fatal(err)
			}
			charge := func(key string) error {
				res := client.Charge(ctx, payments.ChargeRequest{Amount: 100, Currency: "EUR", PaymentMethod: pm.ID, IdempotencyKey: key})
				if res.Outcome != payments.OutcomeSucceeded {
					return fmt.Errorf("charge %s: got %s (%v)", key, res.Outcome, res.Err)
				}
				return nil
			}
			for i := range 20 {
				if err := charge(fmt.Sprintf("seq-%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			if n := accepted.Load(); n != 1 {
				t.Errorf("21 sequential calls opened %d connections, want 1", n)
			}

			// 8 clients call at once, in rounds: between two rounds all 8 connections are idle
			// at the same moment, which is when a pool of 2 idle connections closes 6.
			const clients, rounds = 8, 10
			for r := range rounds {
				var wg sync.WaitGroup
				errs := make(chan error, clients)
				for c := range clients {
					wg.Add(1)
					go func() { defer wg.Done(); errs <- charge(fmt.Sprintf("par-%d-%d", r, c)) }()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			// The sequential calls' connection is one of the 8. A call may dial a spare one now
			// and then: a connection goes back to the pool just after its answer has been read,
			// and a call quicker than that dials anew.
			if n, most := accepted.Load(), int64(2*clients); n > most {
				t.Errorf("%d rounds of %d calls at once opened %d connections in all, want at most %d (about %d)",
					rounds, clients, n, most, clients)
			} else {
				t.Logf("%d rounds of %d calls at once opened %d connections in all", rounds, clients, n)
			}
		})
	}
}

// TestGatewayClientOneAttemptOnADeadConnection: a charge sent on a kept-alive connection that
// the gateway closes without answering reaches the gateway once, and its outcome is Unknown.
// net/http would resend it on its own (it carries an Idempotency-Key) if the client let it.
func TestGatewayClientOneAttemptOnADeadConnection(t *testing.T) {
	var charges atomic.Int64
	srv, accepted := startCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet { // FindCharges: answer, and keep the connection
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"data":[]}`)
			return
		}
		charges.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close() // the request arrived; its answer never leaves
	}))
	client := payments.NewGatewayClient(srv.URL, 5*time.Second)
	ctx := context.Background()
	if _, err := client.FindCharges(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	res := client.Charge(ctx, payments.ChargeRequest{Amount: 100, Currency: "EUR", PaymentMethod: "pm_x", IdempotencyKey: "k"})
	if res.Outcome != payments.OutcomeUnknown || res.Err == nil {
		t.Errorf("got %s %v, want unknown with an error", res.Outcome, res.Err)
	}
	if n := charges.Load(); n != 1 {
		t.Errorf("the gateway saw the charge %d times, want once", n)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("the client opened %d connections, want 1 (the charge went out on the kept-alive one)", n)
	}
}
