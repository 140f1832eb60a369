package handlers_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"gorm.io/gorm"

	"checkoutlab/handlers"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

func TestDemoSecretsInUse(t *testing.T) {
	demo := handlers.DemoValues{WebhookSecret: "whsec_demo", GatewayControlToken: "gw_demo",
		APIKeys: map[string]string{"acme": "sk_test_acme", "globex": "sk_test_globex"}}

	t.Run("AllDemo", func(t *testing.T) {
		got := handlers.DemoSecretsInUse(demo, demo)
		want := []string{"WEBHOOK_SECRET", "SHOP_API_KEYS (acme, globex)", "GATEWAY_CONTROL_TOKEN"}
		if !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
		err := handlers.RefuseDemoSecrets("production", got)
		if err == nil || !strings.Contains(err.Error(), "WEBHOOK_SECRET") {
			t.Errorf("production: got %v, want an error naming WEBHOOK_SECRET", err)
		}
		if err := handlers.RefuseDemoSecrets("", got); err != nil {
			t.Errorf("development: got %v, want nil (a warning is the caller's)", err)
		}
	})
	t.Run("OneKeyLeft", func(t *testing.T) {
		// globex's key given to acme is still a published key.
		running := handlers.DemoValues{WebhookSecret: "whsec_mine", GatewayControlToken: "gw_mine",
			APIKeys: map[string]string{"acme": "sk_test_globex", "globex": "sk_live_mine"}}
		if got := handlers.DemoSecretsInUse(running, demo); !slices.Equal(got, []string{"SHOP_API_KEYS (acme)"}) {
			t.Errorf("got %q, want SHOP_API_KEYS (acme)", got)
		}
	})
	t.Run("None", func(t *testing.T) {
		running := handlers.DemoValues{WebhookSecret: "whsec_mine", APIKeys: map[string]string{"acme": "sk_live_a"}}
		got := handlers.DemoSecretsInUse(running, demo)
		if len(got) != 0 || handlers.RefuseDemoSecrets("production", got) != nil {
			t.Errorf("got %q, want none and production allowed", got)
		}
	})
}

// TestAcceptedAPIKeys: a database seeded with the demo keys still accepts them, whatever the
// configuration says now.
func TestAcceptedAPIKeys(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		if _, err := models.SeedIfEmpty(context.Background(), db,
			models.DemoTenants(map[string]string{"acme": "sk_test_acme", "globex": "sk_live_globex_own"})); err != nil {
			t.Fatal(err)
		}
		got, err := handlers.AcceptedAPIKeys(context.Background(), models.NewTenantStore(db), models.DefaultAPIKeys)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got["acme"] != "sk_test_acme" {
			t.Errorf("got %v, want only acme's demo key", got)
		}
	})
}
