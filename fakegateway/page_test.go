package fakegateway_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"checkoutlab/fakegateway"
)

// postForm posts a browser form without following the redirect.
func (g *testGateway) postForm(t *testing.T, path string, form url.Values) *http.Response {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(g.srv.URL+path, form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func (g *testGateway) page(t *testing.T, path string) string {
	t.Helper()
	resp, err := http.Get(g.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: got %d", path, resp.StatusCode)
	}
	return string(body)
}

func TestPage(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		g := mustGateway(t, dialect)

		t.Run("AFormPerFault", func(t *testing.T) {
			page := g.page(t, "/")
			for _, name := range []string{"latency", "error_before_commit", "timeout_before_commit", "commit_then_drop",
				"commit_then_delay", "commit_then_error", "decline", "webhook_duplicate", "webhook_reorder",
				"webhook_delay", "webhook_fail", "ignore_idempotency_key"} {
				if !strings.Contains(page, `data-testid="fault-form-`+name+`"`) {
					t.Errorf("no form for %s", name)
				}
			}
		})
		t.Run("ArmAndDisarmByForm", func(t *testing.T) {
			resp := g.postForm(t, "/_control/faults", url.Values{"fault": {"webhook_duplicate"}, "times": {"2"}, "copies": {"4"}, "probability": {"1.0"}, "seed": {""}})
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
				t.Fatalf("got %d to %q, want 303 to /", resp.StatusCode, resp.Header.Get("Location"))
			}
			var list fakegateway.FaultList
			g.mustDo(t, http.MethodGet, "/_control/faults", nil, nil).decode(t, &list)
			if len(list.Faults) != 1 || list.Faults[0].Copies != 4 || list.Faults[0].Remaining != 2 {
				t.Fatalf("got %+v, want webhook_duplicate with copies 4, 2 remaining", list.Faults)
			}
			if !strings.Contains(g.page(t, "/?partial=live"), `data-testid="armed-fault"`) {
				t.Error("armed fault not listed on the page")
			}
			resp = g.postForm(t, "/_control/faults/disarm", url.Values{})
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("disarm: got %d, want 303", resp.StatusCode)
			}
			g.mustDo(t, http.MethodGet, "/_control/faults", nil, nil).decode(t, &list)
			if len(list.Faults) != 0 {
				t.Errorf("got %d faults after disarm, want 0", len(list.Faults))
			}
		})
		t.Run("BadFormShowsError", func(t *testing.T) {
			resp := g.postForm(t, "/_control/faults", url.Values{"fault": {"latency"}, "delay_ms": {"soon"}})
			loc := resp.Header.Get("Location")
			if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/?error=") {
				t.Fatalf("got %d to %q, want 303 to /?error=…", resp.StatusCode, loc)
			}
			if page := g.page(t, loc); !strings.Contains(page, `data-testid="gateway-error"`) {
				t.Error("page does not show the error")
			}
			var list fakegateway.FaultList
			g.mustDo(t, http.MethodGet, "/_control/faults", nil, nil).decode(t, &list)
			if len(list.Faults) != 0 {
				t.Errorf("got %d faults after a bad form, want 0", len(list.Faults))
			}
		})
		t.Run("DoubleChargeFlagged", func(t *testing.T) {
			body := chargeBody(1200, cardOK, "ord_twice")
			g.mustDo(t, http.MethodPost, "/v1/charges", body, key("twice-1"))
			if strings.Contains(g.page(t, "/"), `data-testid="double-charged"`) {
				t.Fatal("one charge flagged as a double charge")
			}
			g.mustDo(t, http.MethodPost, "/v1/charges", body, key("twice-2"))
			live := g.page(t, "/?partial=live")
			if !strings.Contains(live, `data-testid="double-charged"`) || !strings.Contains(live, `class="double"`) {
				t.Error("order charged twice is not flagged")
			}
			if strings.Contains(live, "<html") {
				t.Error("partial renders the whole page")
			}
		})
		t.Run("ResendByForm", func(t *testing.T) {
			ch := g.mustCharge(t, "page-resend", cardOK)
			ev := g.hooks.forCharge(t, ch.ID, 2)[0]
			resp := g.postForm(t, "/_control/events/"+ev.ID+"/resend", url.Values{})
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("got %d, want 303", resp.StatusCode)
			}
			g.hooks.forCharge(t, ch.ID, 3)
			if !strings.Contains(g.page(t, "/"), `data-testid="resend"`) {
				t.Error("no resend button on the page")
			}
		})
	})
}
