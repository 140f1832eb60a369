package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"checkoutlab/handlers/idempotency"
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
func decodeActionRequest(obj map[string]json.RawMessage) (*actionRequest, error) {
	var r actionRequest
	for name, dst := range map[string]*string{"action": &r.Action, "order_id": &r.OrderID, "outcome": &r.Outcome, "reason": &r.Reason} {
		if err := member(obj, name, name, dst); err != nil {
			return nil, err
		}
	}
	return r.normalized(), nil
}

// normalized trims the request and spells out settle_stuck's default outcome, so both
// spellings are one operation.
func (r *actionRequest) normalized() *actionRequest {
	r.Action, r.OrderID, r.Outcome = strings.TrimSpace(r.Action), strings.TrimSpace(r.OrderID), strings.TrimSpace(r.Outcome)
	if r.Action == models.ActionSettleStuck && r.Outcome == "" {
		r.Outcome = payments.SettleResume
	}
	return r
}

// fingerprint is what counts as the same action. Significant: the action, the order and, for
// settle_stuck, the outcome. The reason is not: it explains the operation and does not change
// it, so a retry with the reason retyped is still the same action.
func (r *actionRequest) fingerprint() (idempotency.Fingerprint, error) {
	same := *r
	same.Reason = ""
	return idempotency.FingerprintOf(same)
}

// decodeAction is the idempotency.Decoder of POST /api/v1/reconciliation/actions: an
// *actionRequest.
var decodeAction = jsonRequest("The action", func(obj map[string]json.RawMessage) (any, idempotency.Fingerprint, error) {
	r, err := decodeActionRequest(obj)
	if err != nil {
		return nil, idempotency.Fingerprint{}, err
	}
	fp, err := r.fingerprint()
	return r, fp, err
})

// runAction runs the request's action for its tenant and principal. Answers: 200
// {"action","order_id","result","decision_id","detail"}; 400 invalid_json / invalid_request
// (an unknown action, a missing reason); 404 not_found (an unknown order, or another
// tenant's); 409 action_not_allowed (nothing done); 503 gateway_unavailable (nothing done);
// 502 refund_outcome_unknown (retry: it refunds once).
func runAction(c echo.Context, desk TriageDesk) error {
	r := idempotency.RequestOf(c).(*actionRequest)
	// An action may call the gateway (a refund) before it records its decision: its key is
	// written first, so a double click waits for this answer instead of acting too.
	if err := idempotency.Claim(c); err != nil {
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

// presentAction is the reconciliation page's form (POST /reconciliation/actions): it runs the
// API's action under the form's idempotency_key (made when the page was rendered, so a double
// click sends the same key), with the operator as the key's principal, and answers 303 back to
// the page with the decision marked, or the page again with what went wrong.
func (h *OpsPages) presentAction(c echo.Context) error {
	t, err := h.tenant(c.Request().Context(), c.FormValue("tenant"))
	if err != nil {
		return err
	}
	c.Set(ctxTenant, t)
	c.Set(ctxPrincipal, operatorPrincipal(SessionOf(c)))
	req := (&actionRequest{Action: c.FormValue("action"), OrderID: c.FormValue("order_id"),
		Outcome: c.FormValue("outcome"), Reason: c.FormValue("reason")}).normalized()
	useFormKey(c, c.FormValue("idempotency_key"))
	answer := h.Idempotency.Run(c, func(echo.Context) (any, idempotency.Fingerprint, error) {
		fp, err := req.fingerprint()
		return req, fp, err
	}, h.act)
	if answer.Err == nil && answer.Response.Status == http.StatusOK {
		var res payments.ActionResult
		if err := json.Unmarshal(answer.Response.Body, &res); err != nil {
			return err
		}
		return c.Redirect(http.StatusSeeOther, "/reconciliation?"+url.Values{"tenant": {t.ID}, "decision": {res.DecisionID}}.Encode())
	}
	if answer.Err == nil {
		// A stored refusal, replayed (the same form sent again): show it as the first time.
		var stored struct{ Message string }
		_ = json.Unmarshal(answer.Response.Body, &stored)
		return h.renderReconciliation(c, t.ID, answer.Response.Status, &actionBanner{message: stored.Message})
	}
	err = answer.Err
	e := asDomainError(err)
	msg := e.Message
	if e.Kind == models.KindInvalid && len(e.Fields) > 0 {
		msg = firstField(e.Fields)
	}
	if errors.Is(err, models.ErrRequestInProgress) {
		msg = "This action is being carried out right now (a second click?). Reload the page in a moment to see its decision."
	}
	return h.renderReconciliation(c, t.ID, StatusOf(err), &actionBanner{message: msg})
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
