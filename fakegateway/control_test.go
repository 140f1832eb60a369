package fakegateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestArmFaultJSONWithFormContentType: `curl -d '{"fault":…}'` sends a JSON body with the form
// Content-Type. It must arm the fault (201), not be read as an empty form and redirected.
func TestArmFaultJSONWithFormContentType(t *testing.T) {
	g := mustGateway(t, "sqlite", noSender)
	res, err := http.Post(g.srv.URL+"/_control/faults", "application/x-www-form-urlencoded",
		strings.NewReader(`{"fault":"latency","delay_ms":10}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("got %d, want 201", res.StatusCode)
	}
	list := g.mustDo(t, http.MethodGet, "/_control/faults", nil, nil)
	if !strings.Contains(string(list.Body), `"latency"`) {
		t.Errorf("armed faults: got %s, want latency", list.Body)
	}
}
