package main

import (
	"context"
	"database/sql"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"checkoutlab/cmd/shop/internal/labrun"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// TestDatabaseGoesAway takes the shop's PostgreSQL database away — refusing new connections
// and killing the open ones — before a request, and in the middle of one (while the gateway
// is charging). The shop answers 503 and loses nothing: once the database is back, a retry
// with the same key finishes the checkout with exactly one charge.
func TestDatabaseGoesAway(t *testing.T) {
	st := MustStartShop(t, models.Postgres, fastEnv)
	admin := mustAdmin(t)
	u, _ := url.Parse(st.Env["DATABASE_URL"])
	name := strings.TrimPrefix(u.Path, "/")
	away := func() {
		t.Helper()
		for _, q := range []string{"ALTER DATABASE " + name + " ALLOW_CONNECTIONS false",
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" + name + "'"} {
			if _, err := admin.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	}
	back := func() {
		t.Helper()
		if _, err := admin.Exec("ALTER DATABASE " + name + " ALLOW_CONNECTIONS true"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(back)

	t.Run("BeforeTheRequest", func(t *testing.T) {
		away()
		a := post(st.Shop, "/api/v1/checkout", "db-away", checkoutBody("4242424242424242"))
		if a.Status != http.StatusServiceUnavailable {
			t.Errorf("checkout: got %d %s, want 503", a.Status, a.Raw)
		}
		if res, err := http.Get(st.Shop + "/healthz"); err != nil || res.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("healthz: got %v %v, want 503", res, err)
		}
		back()
		final, _ := retryUntilFinal(t, st.Shop, "/api/v1/checkout", "db-away", checkoutBody("4242424242424242"), 20)
		if final.Status != http.StatusCreated {
			t.Fatalf("after the database came back: got %d %s, want 201", final.Status, final.Raw)
		}
		if got := succeededCharges(t, st.Gateway, final.OrderID()); got != 1 {
			t.Errorf("succeeded charges: got %d, want 1", got)
		}
	})
	t.Run("DuringTheCharge", func(t *testing.T) {
		armFault(t, st.Gateway, map[string]any{"fault": "latency", "delay_ms": 800})
		answer := make(chan labrun.Answer, 1)
		go func() { answer <- post(st.Shop, "/api/v1/checkout", "db-away-mid", checkoutBody("4242424242424242")) }()
		time.Sleep(400 * time.Millisecond) // the order is committed; the gateway is charging
		away()
		a := <-answer
		if a.Err == nil && a.Status < 500 {
			t.Errorf("checkout while the database was away: got %d %s, want a 5xx", a.Status, a.Raw)
		}
		back()
		final, _ := retryUntilFinal(t, st.Shop, "/api/v1/checkout", "db-away-mid", checkoutBody("4242424242424242"), 30)
		if final.Status != http.StatusCreated {
			t.Fatalf("after the database came back: got %d %s, want 201", final.Status, final.Raw)
		}
		if got := succeededCharges(t, st.Gateway, final.OrderID()); got != 1 {
			t.Errorf("succeeded charges: got %d, want 1", got)
		}
	})
}

func mustAdmin(tb testing.TB) *sql.DB {
	tb.Helper()
	u := os.Getenv("TEST_DATABASE_URL")
	if u == "" {
		u = modelstest.DefaultAdminURL
	}
	db, err := sql.Open("pgx", u)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		modelstest.SkipOrFail(tb, "PostgreSQL is not reachable: "+err.Error())
	}
	return db
}
