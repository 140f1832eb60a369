package handlers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"checkoutlab/models"
)

// DemoValues are secrets as the project publishes them — in the README, docs/api.md and the
// source — for a shop that is told nothing. Anyone who has read them can sign a webhook the
// shop believes (WEBHOOK_SECRET), call the API as a tenant (SHOP_API_KEYS) or drive the fake
// gateway's control API (GATEWAY_CONTROL_TOKEN). cmd/shop fills one with its defaults and one
// with what it runs with, and asks DemoSecretsInUse.
type DemoValues struct {
	WebhookSecret       string
	APIKeys             map[string]string // tenant → API key
	GatewayControlToken string
}

// DemoSecretsInUse lists, by the variable that sets it, each secret of running that still
// holds its published demo value, e.g. ["WEBHOOK_SECRET", "SHOP_API_KEYS (acme, globex)"]; nil
// when there is none. An API key counts as a demo key if it is any tenant's demo key. The
// operator password is never a demo value: unset, the shop makes one at start.
//
// API keys are seeded once: a database seeded with the demo keys accepts them whatever
// SHOP_API_KEYS says later, so running.APIKeys should be AcceptedAPIKeys of the demo keys.
func DemoSecretsInUse(running, demo DemoValues) []string {
	var inUse []string
	if running.WebhookSecret != "" && running.WebhookSecret == demo.WebhookSecret {
		inUse = append(inUse, "WEBHOOK_SECRET")
	}
	published := map[string]bool{}
	for _, k := range demo.APIKeys {
		published[k] = true
	}
	var tenants []string
	for tenant, key := range running.APIKeys {
		if published[key] {
			tenants = append(tenants, tenant)
		}
	}
	if len(tenants) > 0 {
		sort.Strings(tenants)
		inUse = append(inUse, "SHOP_API_KEYS ("+strings.Join(tenants, ", ")+")")
	}
	if running.GatewayControlToken != "" && running.GatewayControlToken == demo.GatewayControlToken {
		inUse = append(inUse, "GATEWAY_CONTROL_TOKEN")
	}
	return inUse
}

// RefuseDemoSecrets returns an error naming the demo secrets in use when env (SHOP_ENV) is
// "production", and nil otherwise: a shop for real customers must not start with secrets
// anyone can read.
func RefuseDemoSecrets(env string, inUse []string) error {
	if env != "production" || len(inUse) == 0 {
		return nil
	}
	return fmt.Errorf("SHOP_ENV=production with published demo secrets: %s; set each to a value of your own",
		strings.Join(inUse, ", "))
}

// AcceptedAPIKeys returns the entries of keys (tenant → API key) that still authenticate a
// tenant in tenants — for DemoSecretsInUse, the demo keys the database accepts.
func AcceptedAPIKeys(ctx context.Context, tenants TenantFinder, keys map[string]string) (map[string]string, error) {
	accepted := map[string]string{}
	for tenant, key := range keys {
		_, err := tenants.ByAPIKey(ctx, key)
		switch {
		case err == nil:
			accepted[tenant] = key
		case !errors.Is(err, models.ErrUnauthorized):
			return nil, fmt.Errorf("check demo API keys: %w", err)
		}
	}
	return accepted, nil
}
