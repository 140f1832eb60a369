package main

import (
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"checkoutlab/telemetry"
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
			Volumes []string `yaml:"volumes"`
			Ports   []string `yaml:"ports"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatalf("parse docker-compose.yml: %v", err)
	}
	for _, name := range []string{"postgres", "shop-1", "shop-2", "proxy", "gateway", "jaeger"} {
		s, ok := compose.Services[name]
		if !ok {
			t.Fatalf("service %s missing", name)
		}
		if len(s.Healthcheck.Test) == 0 {
			t.Errorf("service %s has no health check", name)
		}
	}
	gw := compose.Services["gateway"]

	// The variables the gateway process reads (cmd/fakegateway).
	gatewayVars := append([]string{"GATEWAY_ADDR", "DATABASE_URL", "DATA_DIR", "SHOP_PUBLIC_URL", "WEBHOOK_SECRET", "GATEWAY_CONTROL_TOKEN"},
		telemetry.Vars...)
	for k := range gw.Environment {
		if !slices.Contains(gatewayVars, k) {
			t.Errorf("gateway sets %s, which is not a gateway variable", k)
		}
	}
	if !slices.Equal(gw.Command, []string{"fakegateway"}) {
		t.Errorf("gateway command: %v", gw.Command)
	}
	// Every variable given to the shop must be one loadConfig, or telemetry.Setup, actually reads.
	read := map[string]bool{}
	if _, err := loadConfig(nil, func(k string) string { read[k] = true; return "" }, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"shop-1", "shop-2"} {
		shop := compose.Services[name]
		for k := range shop.Environment {
			if !read[k] && !slices.Contains(telemetry.Vars, k) {
				t.Errorf("%s sets %s, which the shop never reads", name, k)
			}
		}
		if shop.Environment["WEBHOOK_SECRET"] != gw.Environment["WEBHOOK_SECRET"] || shop.Environment["WEBHOOK_SECRET"] == "" {
			t.Errorf("%s and gateway must share WEBHOOK_SECRET", name)
		}
		// The shop reads the gateway's ledger with the gateway's control token.
		if shop.Environment["GATEWAY_CONTROL_TOKEN"] != gw.Environment["GATEWAY_CONTROL_TOKEN"] || shop.Environment["GATEWAY_CONTROL_TOKEN"] == "" {
			t.Errorf("%s and gateway must share GATEWAY_CONTROL_TOKEN", name)
		}
		// One operator password and one signing key (kept in /data) for both replicas: an
		// operator session or an order link made by one must hold on the other.
		if shop.Environment["OPS_PASSWORD"] == "" {
			t.Errorf("%s has no OPS_PASSWORD: each replica would make up its own", name)
		}
		if !slices.Contains(shop.Volumes, "shopdata:/data") {
			t.Errorf("%s volumes %v, want the shared shopdata:/data", name, shop.Volumes)
		}
		if !strings.HasPrefix(shop.Environment["GATEWAY_URL"], "http://gateway:") {
			t.Errorf("%s GATEWAY_URL = %q, want the gateway service", name, shop.Environment["GATEWAY_URL"])
		}
		// Webhooks go through the load balancer, like every request: any replica may take them.
		if gw.Environment["SHOP_PUBLIC_URL"] != shop.Environment["SHOP_PUBLIC_URL"] || shop.Environment["SHOP_PUBLIC_URL"] != "http://proxy:8080" {
			t.Errorf("gateway delivers webhooks to %q, %s says it is at %q, want both http://proxy:8080", gw.Environment["SHOP_PUBLIC_URL"], name, shop.Environment["SHOP_PUBLIC_URL"])
		}
		if _, err := loadConfig(nil, envOf(shop.Environment), io.Discard); err != nil {
			t.Errorf("%s's compose environment does not load: %v", name, err)
		}
		if shop.DependsOn["postgres"].Condition != "service_healthy" {
			t.Errorf("%s must wait for a healthy postgres", name)
		}
		if !slices.Equal(shop.Command, []string{"shop"}) {
			t.Errorf("%s command: %v", name, shop.Command)
		}
		if len(shop.Ports) > 0 {
			t.Errorf("%s publishes %v, want only the proxy published: a request that bypasses it sees one replica", name, shop.Ports)
		}
	}
	if !maps.Equal(compose.Services["shop-1"].Environment, compose.Services["shop-2"].Environment) {
		t.Errorf("the replicas' environments differ: %v and %v", compose.Services["shop-1"].Environment, compose.Services["shop-2"].Environment)
	}
	// Traces (docs/traces.md): the shop replicas and the gateway send them to Jaeger over
	// OTLP/HTTP, and its UI is published on the machine only.
	jaeger := compose.Services["jaeger"]
	if !strings.HasPrefix(jaeger.Image, "jaegertracing/all-in-one:") {
		t.Errorf("jaeger image %q, want jaegertracing/all-in-one", jaeger.Image)
	}
	if !slices.Contains(jaeger.Ports, "127.0.0.1:16686:16686") {
		t.Errorf("jaeger ports %v, want its UI on 127.0.0.1:16686", jaeger.Ports)
	}
	for _, name := range []string{"shop-1", "shop-2", "gateway"} {
		if got := compose.Services[name].Environment[telemetry.EndpointVar]; got != "http://jaeger:4318" {
			t.Errorf("%s %s = %q, want http://jaeger:4318 (Jaeger's OTLP/HTTP port)", name, telemetry.EndpointVar, got)
		}
	}
	if compose.Services["shop-2"].DependsOn["shop-1"].Condition != "service_healthy" {
		t.Errorf("shop-2 must wait for a healthy shop-1, which applies the migrations")
	}

	// The proxy: nginx with the repository's configuration, its upstream exactly the two
	// replicas on the port they listen on, and no retry of a POST that reached one.
	proxy := compose.Services["proxy"]
	if !strings.HasPrefix(proxy.Image, "nginx:") {
		t.Errorf("proxy image %q, want nginx", proxy.Image)
	}
	if !slices.Contains(proxy.Volumes, "./docker-compose.nginx.conf:/etc/nginx/conf.d/default.conf:ro") {
		t.Errorf("proxy volumes %v, want the repository's docker-compose.nginx.conf as its default.conf", proxy.Volumes)
	}
	if !slices.Contains(proxy.Ports, "127.0.0.1:8080:8080") {
		t.Errorf("proxy ports %v, want 127.0.0.1:8080:8080", proxy.Ports)
	}
	conf, err := os.ReadFile("../../docker-compose.nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	nginx := parseNginx(string(conf))
	if got, want := nginx["upstream shop/server"], []string{"shop-1:8080", "shop-2:8080"}; !slices.Equal(firstWords(got), want) {
		t.Errorf("nginx upstream shop servers %v, want %v", got, want)
	}
	if got := nginx["server/listen"]; !slices.Equal(got, []string{"8080"}) {
		t.Errorf("nginx listens on %v, want 8080", got)
	}
	if got := nginx["server/location //proxy_pass"]; !slices.Equal(got, []string{"http://shop"}) {
		t.Errorf("nginx proxy_pass %v, want http://shop", got)
	}
	if got := nginx["server/location //proxy_next_upstream"]; len(got) != 1 || strings.Contains(got[0], "non_idempotent") {
		t.Errorf("nginx proxy_next_upstream %v, want one, without non_idempotent", got)
	}
}

// parseNginx reads an nginx configuration into "block/…/directive" → the directives'
// arguments, one string per occurrence: enough to check what the compose file relies on.
func parseNginx(conf string) map[string][]string {
	out := map[string][]string{}
	var stack []string
	var words []string
	for _, line := range strings.Split(conf, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		for _, tok := range strings.Fields(strings.NewReplacer("{", " { ", "}", " } ", ";", " ; ").Replace(line)) {
			switch tok {
			case "{":
				stack = append(stack, strings.Join(words, " "))
				words = nil
			case "}":
				stack = stack[:len(stack)-1]
			case ";":
				if len(words) > 0 {
					key := strings.Join(append(slices.Clone(stack), words[0]), "/")
					out[key] = append(out[key], strings.Join(words[1:], " "))
				}
				words = nil
			default:
				words = append(words, tok)
			}
		}
	}
	return out
}

func firstWords(args []string) []string {
	var first []string
	for _, a := range args {
		first = append(first, strings.Fields(a)[0])
	}
	return first
}
