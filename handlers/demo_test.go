package handlers_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"checkoutlab/handlers"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// mustDemoTools serves the demo tools on db, resetting it with models.ResetDemo as cmd/shop
// wires it.
func mustDemoTools(tb testing.TB, db *gorm.DB, gatewayURL string) *httptest.Server {
	tb.Helper()
	e := handlers.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	(&handlers.DemoTools{GatewayURL: gatewayURL, Reset: func(ctx context.Context) error {
		_, err := models.ResetDemo(ctx, db, models.DemoTenants(models.DefaultAPIKeys))
		return err
	}}).Routes(e)
	srv := httptest.NewServer(e)
	tb.Cleanup(srv.Close)
	return srv
}

func TestResetDemoButton(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		modelstest.MustSeed(t, db)
		sold := func() {
			t.Helper()
			if err := db.Exec("UPDATE products SET stock = 0 WHERE sku = 'brass-compass'").Error; err != nil {
				t.Fatal(err)
			}
		}
		stock := func() int {
			t.Helper()
			p, err := models.NewProductStore(db).BySKU(context.Background(), "acme", "brass-compass")
			if err != nil {
				t.Fatal(err)
			}
			return p.Stock
		}
		srv := mustDemoTools(t, db, "http://127.0.0.1:8081")

		t.Run("ErrWithoutCSRF", func(t *testing.T) {
			sold()
			b := MustBrowser(t, srv)
			b.MustGet(t, "/ops/reset-demo", http.StatusOK)
			b.MustPost(t, "/ops/reset-demo", url.Values{"_csrf": {"forged"}}, http.StatusBadRequest) // csrf_failed
			if got := stock(); got != 0 {
				t.Errorf("stock after a forged reset: got %d, want 0 (nothing reset)", got)
			}
		})
		t.Run("OK", func(t *testing.T) {
			sold()
			b := MustBrowser(t, srv)
			page := b.MustGet(t, "/ops/reset-demo", http.StatusOK)
			if page.Find(`form[method=post] [data-testid="reset-demo"]`).Length() != 1 {
				t.Fatal("got no reset button in a POST form, want one")
			}
			resp, _ := b.MustPost(t, "/ops/reset-demo", nil, http.StatusSeeOther)
			if loc := MustLocation(t, resp); loc != "/ops/reset-demo?done=1" {
				t.Errorf("got a redirect to %q, want /ops/reset-demo?done=1", loc)
			}
			if got := stock(); got != 5 {
				t.Errorf("stock after the reset: got %d, want the seeded 5", got)
			}
			if b.MustGet(t, "/ops/reset-demo?done=1", http.StatusOK).Find(`[data-testid="reset-done"]`).Length() != 1 {
				t.Error("the page does not confirm the reset")
			}
		})
	})
}

func TestGatewayLink(t *testing.T) {
	db := modelstest.MustOpen(t, models.SQLite)
	t.Run("OK", func(t *testing.T) {
		b := MustBrowser(t, mustDemoTools(t, db, "http://127.0.0.1:18081"))
		resp, _ := b.MustGetResponse(t, "/gateway", http.StatusSeeOther)
		if loc := MustLocation(t, resp); loc != "http://127.0.0.1:18081/" {
			t.Errorf("got a redirect to %q, want the gateway's page", loc)
		}
	})
	t.Run("OKWithToken", func(t *testing.T) {
		e := handlers.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
		(&handlers.DemoTools{GatewayURL: "http://127.0.0.1:18081", GatewayToken: "gwctl_demo_checkoutlab_0000"}).Routes(e)
		srv := httptest.NewServer(e)
		t.Cleanup(srv.Close)
		resp, _ := MustBrowser(t, srv).MustGetResponse(t, "/gateway", http.StatusSeeOther)
		if loc, want := MustLocation(t, resp), "http://127.0.0.1:18081/?token=gwctl_demo_checkoutlab_0000"; loc != want {
			t.Errorf("got a redirect to %q, want the gateway's login link %q", loc, want)
		}
	})
	t.Run("ErrNotFoundWithoutGateway", func(t *testing.T) {
		b := MustBrowser(t, mustDemoTools(t, db, ""))
		b.MustGet(t, "/gateway", http.StatusNotFound)
	})
}
