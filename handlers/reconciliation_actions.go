package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
	"checkoutlab/payments"
)

// The triage desk over HTTP: POST /api/v1/reconciliation/actions for programs (a tenant's API
// key), and the reconciliation page's forms for operators. Both run the same handler under the
// same idempotency middleware, as the storefront's checkout form runs the API's checkout: the
// page's presenter turns the form into the API's JSON request, with the operator as the key's
// principal, and the answer into a page. One decision, one stored answer, two ways to show it.

// TriageDesk runs the desk's actions. *payments.Triage is one.
type TriageDesk interface {
	Act(ctx context.Context, req payments.ActionRequest) (*payments.ActionResult, error)
}

// actionRequest is a triage action as the API takes it: {"action","order_id","reason"}, and
// "outcome" ("resume" or "failed") for settle_stuck.
type actionRequest struct {
	Action  string `json:"action"`
	OrderID string `json:"order_id"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
}

// decodeActionRequest reads the members of an action body by their exact names.
func decodeActionRequest(body []byte) (*actionRequest, error) {
	obj, err := jsonObject(body, "The action")
	if err != nil {
		return nil, err
	}
	var r actionRequest
	for name, dst := range map[string]*string{"action": &r.Action, "order_id": &r.OrderID, "outcome": &r.Outcome, "reason": &r.Reason} {
		if err := member(obj, name, name, dst); err != nil {
			return nil, err
		}
	}
	r.Action, r.OrderID, r.Outcome = strings.TrimSpace(r.Action), strings.TrimSpace(r.OrderID), strings.TrimSpace(r.Outcome)
	if r.Action == models.ActionSettleStuck && r.Outcome == "" {
		r.Outcome = payments.SettleResume // the default, spelled out: both spellings are one operation
	}
	return &r, nil
}

// ActionFingerprint is the FingerprintFunc of the triage actions. Significant: the action, the
// order and, for settle_stuck, the outcome. The reason is not: it explains the operation and
// does not change it, so a retry with the reason retyped is still the same action.
func ActionFingerprint(body []byte) (Fingerprint, error) {
	r, err := decodeActionRequest(body)
	if err != nil {
		return Fingerprint{}, err
	}
	r.Reason = ""
	return fingerprintOf(r)
}

// runAction decodes an action and runs it for the request's tenant and principal. Answers: 200
// {"action","order_id","result","decision_id","detail"}; 400 invalid_json / invalid_request
// (an unknown action, a missing reason); 404 not_found (an unknown order, or another
// tenant's); 409 action_not_allowed (nothing done); 503 gateway_unavailable (nothing done);
// 502 refund_outcome_unknown (retry: it refunds once).
func runAction(c echo.Context, desk TriageDesk) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	r, err := decodeActionRequest(body)
	if err != nil {
		return err
	}
	res, err := desk.Act(c.Request().Context(), payments.ActionRequest{TenantID: TenantOf(c).ID, OrderID: r.OrderID,
		Action: r.Action, Outcome: r.Outcome, Reason: r.Reason, Who: PrincipalOf(c)})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, res)
}

// operatorPrincipal names the operator behind a browser session for keys and decisions: a hash
// of the session id, never the id itself (it is the operator's credential).
func operatorPrincipal(session string) string {
	sum := sha256.Sum256([]byte(session))
	return "operator:" + hex.EncodeToString(sum[:])[:16]
}

// presentAction is the presenter of the reconciliation page's forms (POST
// /reconciliation/actions): it runs the form as the API's JSON request, under the form's
// idempotency_key (made when the page was rendered, so a double click sends the same key), and
// answers 303 back to the page with the decision marked, or the page again with what went wrong.
func (h *OpsPages) presentAction(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		tenant := c.FormValue("tenant")
		t, err := h.tenant(c.Request().Context(), tenant)
		if err != nil {
			return err
		}
		c.Set(ctxTenant, t)
		c.Set(ctxPrincipal, operatorPrincipal(SessionOf(c)))
		body, err := json.Marshal(map[string]string{"action": c.FormValue("action"), "order_id": c.FormValue("order_id"),
			"outcome": c.FormValue("outcome"), "reason": c.FormValue("reason")})
		if err != nil {
			return err
		}
		rec, err := runAsJSON(c, next, body, c.FormValue("idempotency_key"))
		if err == nil && rec.status == http.StatusOK {
			var res payments.ActionResult
			if err := json.Unmarshal(rec.body.Bytes(), &res); err != nil {
				return err
			}
			return c.Redirect(http.StatusSeeOther, "/reconciliation?"+url.Values{"tenant": {t.ID}, "decision": {res.DecisionID}}.Encode())
		}
		if err == nil {
			// A stored refusal, replayed (the same form sent again): show it as the first time.
			var answer struct{ Message string }
			_ = json.Unmarshal(rec.body.Bytes(), &answer)
			return h.renderReconciliation(c, t.ID, rec.status, &actionBanner{message: answer.Message})
		}
		e := asDomainError(err)
		msg := e.Message
		if e.Kind == models.KindInvalid && len(e.Fields) > 0 {
			msg = firstField(e.Fields)
		}
		if errors.Is(err, ErrRequestInProgress) {
			msg = "This action is being carried out right now (a second click?). Reload the page in a moment to see its decision."
		}
		return h.renderReconciliation(c, t.ID, StatusOf(err), &actionBanner{message: msg})
	}
}

// firstField is the message of the first invalid field, in a fixed order.
func firstField(fields map[string]string) string {
	for _, name := range []string{"reason", "action", "order_id", "outcome"} {
		if m, ok := fields[name]; ok {
			return m
		}
	}
	for _, m := range fields {
		return m
	}
	return "The action is not valid."
}

// actionBanner is what the page says about the action just taken.
type actionBanner struct {
	ok      bool
	message string
}
