package fakegateway_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"checkoutlab/fakegateway"
)

// serveTimeouts are short server timeouts, so the tests see them strike.
const serveTimeouts = 200 * time.Millisecond

// mustServe runs a gateway with Serve, as cmd/fakegateway does, on a fresh SQLite database and
// returns its address.
func mustServe(t *testing.T, opts ...gwOption) string {
	t.Helper()
	cfg := fakegateway.Config{
		DB:                mustStore(t, "sqlite").mustOpen(t),
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		ReadHeaderTimeout: serveTimeouts,
		ReadTimeout:       serveTimeouts,
		IdleTimeout:       serveTimeouts,
	}
	for _, o := range opts {
		o(&cfg)
	}
	gw, err := fakegateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: got %v, want nil after a shutdown", err)
		}
	})
	return ln.Addr().String()
}

// closedByServer reads from conn until the server closes it, and fails if that has not
// happened within waitFor (a safety net, far above the timeouts under test). It returns what
// the server wrote before closing.
func closedByServer(t *testing.T, conn net.Conn) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(waitFor))
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %s", waitFor)
	}
	return string(got)
}

func TestServeTimeouts(t *testing.T) {
	addr := mustServe(t)
	dial := func(t *testing.T) net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}

	t.Run("StalledHeaders", func(t *testing.T) {
		conn := dial(t)
		_, _ = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n") // and never the blank line
		if got := closedByServer(t, conn); strings.Contains(got, "200 OK") {
			t.Errorf("got %q, want the connection closed without an answer", got)
		}
	})
	t.Run("StalledBody", func(t *testing.T) {
		conn := dial(t)
		_, _ = io.WriteString(conn, "POST /v1/payment_methods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
			"Content-Length: 100\r\n\r\n{\"card_number\":") // 85 bytes short, for ever
		if got := closedByServer(t, conn); strings.Contains(got, "201 Created") {
			t.Errorf("got %q, want no payment method from half a body", got)
		}
	})
	t.Run("IdleConnection", func(t *testing.T) {
		conn := dial(t)
		_, _ = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("healthz: got %d, want 200", resp.StatusCode)
		}
		closedByServer(t, conn) // kept alive, then closed once idle
	})
	// The read timeout bounds reading the request only: a fault that holds the answer back
	// on purpose (here 3 × the timeout) still answers.
	t.Run("FaultOutlastsReadTimeout", func(t *testing.T) {
		client := &http.Client{Timeout: waitFor}
		arm, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/_control/faults",
			strings.NewReader(`{"fault":"latency","delay_ms":600}`))
		res, err := client.Do(arm)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("arm latency: got %d, want 201", res.StatusCode)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/charges",
			strings.NewReader(`{"amount":100,"currency":"EUR","card_number":"4242424242424242"}`))
		req.Header.Set("Idempotency-Key", "slow-1")
		req.GetBody = nil // one attempt: a resend would hide a dropped connection
		res, err = client.Do(req)
		if err != nil {
			t.Fatalf("charge under a 600 ms latency fault: %v", err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			t.Errorf("charge: got %d, want 201", res.StatusCode)
		}
	})
}

func TestHealthzWithoutDatabase(t *testing.T) {
	g := mustGateway(t, "sqlite", noSender)
	if err := fakegateway.CloseDB(g.db); err != nil {
		t.Fatal(err)
	}
	r := g.mustDo(t, http.MethodGet, "/healthz", nil, nil)
	if r.Status != http.StatusServiceUnavailable || r.errorCode(t) != "database_unavailable" {
		t.Errorf("got %d %s, want 503 database_unavailable", r.Status, r.Body)
	}
}
