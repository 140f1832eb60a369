package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"checkoutlab/fakegateway"
	"checkoutlab/payments"
)

func TestLoadConfig(t *testing.T) {
	t.Run("OKDefaults", func(t *testing.T) {
		cfg, err := loadConfig(nil, envOf(nil), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.ShopAddr != "127.0.0.1:8080" || cfg.GatewayAddr != "127.0.0.1:8081" || cfg.GatewayURL != "" ||
			cfg.ShopPublicURL != "http://127.0.0.1:8080" || cfg.DataDir != "./data" || cfg.DatabaseURL != "" ||
			cfg.IdempotencyLease != 30*time.Second || cfg.IdempotencyRetention != 24*time.Hour ||
			cfg.JournalRetention != 30*24*time.Hour || cfg.JobRescueAfter != time.Minute ||
			cfg.WebhookSecret != demoWebhookSecret || cfg.APIKeys["acme"] != "sk_test_acme" ||
			cfg.GatewayControlToken != fakegateway.DemoControlToken || cfg.ShopSecret != "" || cfg.OpsPassword != "" ||
			cfg.ShopEnv != "development" || cfg.CheckHosts || cfg.OrderHold != payments.DefaultOrderHold {
			t.Errorf("got %+v, want the README's defaults", cfg)
		}
		if cfg.DemoSecrets.WebhookSecret != demoWebhookSecret || cfg.DemoSecrets.GatewayControlToken != fakegateway.DemoControlToken ||
			cfg.DemoSecrets.APIKeys["globex"] != "sk_test_globex" {
			t.Errorf("demo secrets: got %+v, want the published defaults", cfg.DemoSecrets)
		}
	})
	t.Run("OKHardening", func(t *testing.T) {
		cfg, err := loadConfig(nil, envOf(map[string]string{"GATEWAY_CONTROL_TOKEN": "my-own-control-token-42",
			"SHOP_SECRET": strings.Repeat("s", 32), "OPS_PASSWORD": "correct horse", "SHOP_ENV": "production",
			"CHECK_HOSTS": "true", "ORDER_HOLD": "2m"}), io.Discard)
		if err != nil || cfg.GatewayControlToken != "my-own-control-token-42" || len(cfg.ShopSecret) != 32 ||
			cfg.OpsPassword != "correct horse" || cfg.ShopEnv != "production" || !cfg.CheckHosts || cfg.OrderHold != 2*time.Minute {
			t.Errorf("got %+v (%v), want the values given", cfg, err)
		}
	})
	t.Run("OKFlagWinsOverEnv", func(t *testing.T) {
		cfg, err := loadConfig([]string{"-addr", "127.0.0.1:9000"}, envOf(map[string]string{"SHOP_ADDR": "127.0.0.1:7000"}), io.Discard)
		if err != nil || cfg.ShopAddr != "127.0.0.1:9000" || cfg.ShopPublicURL != "http://127.0.0.1:9000" {
			t.Errorf("got %q, %q (%v), want the flag's address", cfg.ShopAddr, cfg.ShopPublicURL, err)
		}
	})
	t.Run("OKJournalRetentionFlag", func(t *testing.T) {
		cfg, err := loadConfig([]string{"--journal-retention", "48h"}, envOf(map[string]string{"JOURNAL_RETENTION": "1h"}), io.Discard)
		if err != nil || cfg.JournalRetention != 48*time.Hour {
			t.Errorf("got %v (%v), want the flag's 48h", cfg.JournalRetention, err)
		}
	})
	bad := map[string]map[string]string{
		"IDEMPOTENCY_LEASE":     {"IDEMPOTENCY_LEASE": "soon"},
		"IDEMPOTENCY_RETENTION": {"IDEMPOTENCY_RETENTION": "-1h"},
		"JOURNAL_RETENTION":     {"JOURNAL_RETENTION": "30d"},
		"JOB_RESCUE_AFTER":      {"JOB_RESCUE_AFTER": "0s"},
		"SHOP_ADDR":             {"SHOP_ADDR": "8080"},
		"DATABASE_URL":          {"DATABASE_URL": "mysql://x"},
		"SHOP_CRASH_AT":         {"SHOP_CRASH_AT": "somewhere"},
		"WEBHOOK_SECRET":        {"WEBHOOK_SECRET": "hunter2"},
		"SHOP_API_KEYS":         {"SHOP_API_KEYS": "acme=sk_test_acme"},
		"GATEWAY_CONTROL_TOKEN": {"GATEWAY_CONTROL_TOKEN": "short"},
		"SHOP_SECRET":           {"SHOP_SECRET": "too-short-to-sign-with"},
		"SHOP_ENV":              {"SHOP_ENV": "prod"},
		"CHECK_HOSTS":           {"CHECK_HOSTS": "maybe"},
		"ORDER_HOLD":            {"ORDER_HOLD": "0s"},
	}
	for name, env := range bad {
		t.Run("Err"+name, func(t *testing.T) {
			_, err := loadConfig(nil, envOf(env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("got %v, want an error naming %s", err, name)
			}
			if err != nil && (name == "GATEWAY_CONTROL_TOKEN" || name == "SHOP_SECRET") && strings.Contains(err.Error(), env[name]) {
				t.Errorf("got %v, want a message that does not repeat the secret", err)
			}
		})
	}
}
