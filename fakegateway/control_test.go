package fakegateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestArmFaultJSONWithFormContentType: `curl -H 'Authorization: Bearer …' -d '{"fault":…}'`
// sends a JSON body with the form Content-Type. It must arm the fault (201), not be read as an empty form and redirected.
func TestArmFaultJSONWithFormContentType(t *testing.T) {
	g := mustGateway(t, "sqlite", noSender)
	req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/_control/faults", strings.NewReader(`{"fault":"latency","delay_ms":10}`))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+g.token)
	res, err := http.DefaultClient.Do(req)
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
