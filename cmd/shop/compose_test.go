package main

import (
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// There is no Docker engine on the machines that run our tests, so docker-compose.yml is
// checked by reading it: the services exist, the shop's variables are ones the code reads,
// and the two processes agree on the secret and on where to find each other.
func TestComposeFile(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Build       any               `yaml:"build"`
			Image       string            `yaml:"image"`
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Healthcheck struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
			DependsOn map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatalf("parse docker-compose.yml: %v", err)
	}
	for _, name := range []string{"postgres", "shop", "gateway"} {
		s, ok := compose.Services[name]
		if !ok {
			t.Fatalf("service %s missing", name)
		}
		if len(s.Healthcheck.Test) == 0 {
			t.Errorf("service %s has no health check", name)
		}
	}
	shop, gw := compose.Services["shop"], compose.Services["gateway"]

	// Every variable given to the shop must be one loadConfig actually reads.
	read := map[string]bool{}
	if _, err := loadConfig(nil, func(k string) string { read[k] = true; return "" }, io.Discard); err != nil {
		t.Fatal(err)
	}
	for k := range shop.Environment {
		if !read[k] {
			t.Errorf("shop sets %s, which the shop never reads", k)
		}
	}
	// The variables the gateway process reads (cmd/fakegateway).
	gatewayVars := []string{"GATEWAY_ADDR", "DATABASE_URL", "DATA_DIR", "SHOP_PUBLIC_URL", "WEBHOOK_SECRET", "GATEWAY_CONTROL_TOKEN"}
	for k := range gw.Environment {
		if !slices.Contains(gatewayVars, k) {
			t.Errorf("gateway sets %s, which is not a gateway variable", k)
		}
	}
	if shop.Environment["WEBHOOK_SECRET"] != gw.Environment["WEBHOOK_SECRET"] || shop.Environment["WEBHOOK_SECRET"] == "" {
		t.Errorf("shop and gateway must share WEBHOOK_SECRET")
	}
	// The shop reads the gateway's ledger with the gateway's control token.
	if shop.Environment["GATEWAY_CONTROL_TOKEN"] != gw.Environment["GATEWAY_CONTROL_TOKEN"] || shop.Environment["GATEWAY_CONTROL_TOKEN"] == "" {
		t.Errorf("shop and gateway must share GATEWAY_CONTROL_TOKEN")
	}
	if !strings.HasPrefix(shop.Environment["GATEWAY_URL"], "http://gateway:") {
		t.Errorf("shop GATEWAY_URL = %q, want the gateway service", shop.Environment["GATEWAY_URL"])
	}
	if gw.Environment["SHOP_PUBLIC_URL"] != shop.Environment["SHOP_PUBLIC_URL"] {
		t.Errorf("gateway delivers webhooks to %q, shop says it is at %q", gw.Environment["SHOP_PUBLIC_URL"], shop.Environment["SHOP_PUBLIC_URL"])
	}
	if _, err := loadConfig(nil, envOf(shop.Environment), io.Discard); err != nil {
		t.Errorf("the shop's compose environment does not load: %v", err)
	}
	if shop.DependsOn["postgres"].Condition != "service_healthy" {
		t.Errorf("shop must wait for a healthy postgres")
	}
	if !slices.Equal(shop.Command, []string{"shop"}) || !slices.Equal(gw.Command, []string{"fakegateway"}) {
		t.Errorf("commands: shop %v, gateway %v", shop.Command, gw.Command)
	}
}
