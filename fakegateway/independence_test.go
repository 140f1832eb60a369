package fakegateway_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSharesNoCodeWithTheShop: the fake gateway plays another company, so it must not import
// the shop's packages (its own migrations are the one part of the repository it uses). A
// shared helper would let a change to the shop silently change the provider it is tested
// against.
func TestSharesNoCodeWithTheShop(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "checkoutlab/fakegateway", "checkoutlab/cmd/fakegateway").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// telemetry only installs the trace exporter for the command (telemetry.Setup); it answers
	// nothing and the gateway package itself does not import it.
	allowed := map[string]bool{"checkoutlab/fakegateway": true, "checkoutlab/cmd/fakegateway": true, "checkoutlab/migrations/gateway": true,
		"checkoutlab/telemetry": true}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "checkoutlab/") && !allowed[pkg] {
			t.Errorf("the fake gateway imports %s", pkg)
		}
	}
}
