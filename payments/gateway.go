package payments

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"checkoutlab/models"
)

// GatewayClient talks to the payment gateway (the fake gateway, or anything that speaks its
// API, docs/api.md). Every call has an explicit timeout: a call that does not finish in
// time is abandoned and, for a charge, reported as an Unknown outcome, never as a failure.
type GatewayClient struct {
	baseURL string
	http    *http.Client
	// ControlToken is sent as "Authorization: Bearer <token>" to the gateway's control API
	// (/_control/*, which Ledger reads), and only there: a gateway started with a control
	// token (GATEWAY_CONTROL_TOKEN) refuses those calls without it. The payments API needs no
	// credential. Set it before the first call.
	ControlToken string
}

// NewGatewayClient returns a client for the gateway at baseURL (e.g. "http://127.0.0.1:8081")
// whose calls each give up after timeout. A timeout of zero or less means 10 seconds.
func NewGatewayClient(baseURL string, timeout time.Duration) *GatewayClient {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &GatewayClient{
		baseURL: strings.TrimRight(baseURL, "/"),
		// Every call is a client span that carries its trace context to the gateway.
		http: &http.Client{Timeout: timeout, Transport: traceGatewayCalls(newGatewayTransport(GatewayConns))},
	}
}

// GatewayConns is how many idle connections to the gateway the client keeps for reuse. A
// checkout makes one gateway call at a time, and the database pool bounds how many checkouts
// make progress at once (models.PostgresPoolSize by default; SQLite serves fewer still), so
// this many let every one of them reuse a connection instead of opening a new one per call.
// An idle connection costs a file descriptor and closes by itself after 90 s.
const GatewayConns = 2 * models.PostgresPoolSize

// newGatewayTransport is the client's HTTP transport: http.DefaultTransport's settings and
// timeouts, keep-alive on, but conns idle connections kept per host instead of 2. Every
// call to the gateway goes through here: wrap the transport (tracing, metrics) in this one
// place.
//
// Reusing connections does not make a call happen twice: net/http resends a request on its
// own only when it can rewind the body, and do sets req.GetBody = nil for that reason.
func newGatewayTransport(conns int) http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = conns
	t.MaxIdleConns = max(t.MaxIdleConns, conns)
	return t
}

// GatewayCharge is a charge as the gateway reports it.
type GatewayCharge struct {
	ID             string            `json:"id"`
	Status         string            `json:"status"` // succeeded, failed, refunded (pending in events)
	Amount         int64             `json:"amount"`
	Currency       string            `json:"currency"`
	IdempotencyKey string            `json:"idempotency_key"`
	Metadata       map[string]string `json:"metadata"`
	Created        int64             `json:"created"`
	PaymentMethod  string            `json:"payment_method"`
	FailureCode    string            `json:"failure_code,omitempty"`
}

// GatewayPaymentMethod stands for a card at the gateway; the shop keeps its ID and Last4,
// never the card number.
type GatewayPaymentMethod struct {
	ID    string `json:"id"`
	Last4 string `json:"last4"`
	Brand string `json:"brand"`
}

// GatewayEvent is the body of a gateway webhook.
type GatewayEvent struct {
	ID      string `json:"id"`
	Type    string `json:"type"` // charge.pending, charge.succeeded, charge.failed, charge.refunded
	Created int64  `json:"created"`
	Data    struct {
		Charge GatewayCharge `json:"charge"`
	} `json:"data"`
}

// GatewayError is an answer of the gateway with a non-2xx status: the request arrived and was
// refused or failed. Code is the gateway's "error" field.
type GatewayError struct {
	Status  int
	Code    string
	Message string
}

func (e *GatewayError) Error() string {
	return fmt.Sprintf("gateway answered %d %s: %s", e.Status, e.Code, e.Message)
}

// ChargeRequest is one charge. IdempotencyKey is required: the shop derives it from its own
// payment ("<payment id>:charge") and records it before calling, so that a retry, or a lookup
// after an Unknown outcome, uses the same key.
type ChargeRequest struct {
	Amount         int64
	Currency       string
	PaymentMethod  string
	IdempotencyKey string
	Metadata       map[string]string
}

// Outcome classifies a charge attempt. Every attempt has exactly one.
type Outcome int

const (
	// OutcomeUnknown: the charge may or may not exist (timeout, dropped connection, a 5xx
	// that may come after the commit, an unreadable answer). Do not charge again under a new
	// key: keep the payment pending and ask FindCharges, or wait for the webhook.
	OutcomeUnknown Outcome = iota
	// OutcomeSucceeded: the gateway answered 2xx with the charge.
	OutcomeSucceeded
	// OutcomeDeclined: the gateway answered 402; DeclineCode says why. Final for this key.
	OutcomeDeclined
	// OutcomeNotCharged: the gateway certainly made no charge for this attempt, and may well
	// make it next time: the connection was refused, or it answered 429 or 503 (busy,
	// down). Safe to retry with the same key.
	OutcomeNotCharged
	// OutcomeRejected: the gateway refused this request for good, before any work (a 4xx
	// other than 402, 409 and 429: an invalid request, an unknown payment method). Nothing
	// was charged, and the same request would be refused again, so retrying is pointless:
	// the payment fails.
	OutcomeRejected
)

func (o Outcome) String() string {
	switch o {
	case OutcomeSucceeded:
		return "succeeded"
	case OutcomeDeclined:
		return "declined"
	case OutcomeNotCharged:
		return "not_charged"
	case OutcomeRejected:
		return "rejected"
	default:
		return "unknown"
	}
}

// ChargeResult is what a charge attempt came to. Charge is set when the gateway answered with
// a charge (Succeeded, Declined); Err says what went wrong for NotCharged and Unknown.
type ChargeResult struct {
	Outcome     Outcome
	Charge      *GatewayCharge
	DeclineCode string
	StatusCode  int // 0 when no answer arrived
	Replayed    bool
	Err         error
}

// Charge asks the gateway to charge req and classifies the result; it never returns a
// half-truth. The request is sent exactly once: net/http would otherwise resend a POST that
// carries an Idempotency-Key on its own after a dropped keep-alive connection, hiding the
// very failure the caller must see and handle.
func (c *GatewayClient) Charge(ctx context.Context, req ChargeRequest) ChargeResult {
	if req.IdempotencyKey == "" {
		return ChargeResult{Outcome: OutcomeNotCharged, Err: errors.New("charge: idempotency key is required")}
	}
	body, _ := json.Marshal(map[string]any{ // plain values always marshal
		"amount": req.Amount, "currency": req.Currency, "payment_method": req.PaymentMethod, "metadata": req.Metadata,
	})
	status, respBody, header, err := c.do(ctx, http.MethodPost, "/v1/charges", body, req.IdempotencyKey)
	if err != nil {
		if isConnRefused(err) {
			return ChargeResult{Outcome: OutcomeNotCharged, Err: fmt.Errorf("charge: %w", err)}
		}
		return ChargeResult{Outcome: OutcomeUnknown, Err: fmt.Errorf("charge: %w", err)}
	}
	res := ChargeResult{StatusCode: status, Replayed: header.Get("Idempotent-Replayed") == "true"}
	switch {
	case status >= 200 && status < 300, status == http.StatusPaymentRequired:
		var ch GatewayCharge
		if err := json.Unmarshal(respBody, &ch); err != nil || ch.ID == "" {
			res.Outcome, res.Err = OutcomeUnknown, fmt.Errorf("charge: unreadable answer with status %d", status)
			return res
		}
		res.Charge = &ch
		res.Outcome = OutcomeSucceeded
		if status == http.StatusPaymentRequired {
			res.Outcome, res.DeclineCode = OutcomeDeclined, ch.FailureCode
		}
		return res
	default:
		res.Err = fmt.Errorf("charge: %w", gatewayError(status, respBody))
		switch {
		case !answeredBeforeCommit(status):
			res.Outcome = OutcomeUnknown
		case status == http.StatusTooManyRequests, status == http.StatusServiceUnavailable:
			res.Outcome = OutcomeNotCharged
		default:
			res.Outcome = OutcomeRejected
		}
		return res
	}
}

// answeredBeforeCommit reports whether the gateway uses status only before it does any work.
// That is its contract (docs/failure-modes.md): validation and other 4xx refusals, 429 and
// 503. A 409 is excluded: it means another request holds, or held, the key with a charge
// behind it. 500, 502, 504 and the rest may come after the commit, so they mean Unknown.
func answeredBeforeCommit(status int) bool {
	switch {
	case status == http.StatusPaymentRequired, status == http.StatusConflict:
		return false
	case status >= 400 && status < 500:
		return true
	case status == http.StatusServiceUnavailable:
		return true
	default:
		return false
	}
}

// isConnRefused reports whether err happened while dialling, before any byte of the request
// was sent.
func isConnRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// CreatePaymentMethod exchanges a card number for a payment method. It returns a
// *GatewayError (400 invalid_card_number for a bad number) or a transport error.
func (c *GatewayClient) CreatePaymentMethod(ctx context.Context, cardNumber string) (GatewayPaymentMethod, error) {
	body, _ := json.Marshal(map[string]string{"card_number": cardNumber})
	var pm GatewayPaymentMethod
	if err := c.call(ctx, http.MethodPost, "/v1/payment_methods", body, "", &pm); err != nil {
		return pm, fmt.Errorf("create payment method: %w", err)
	}
	return pm, nil
}

// FindCharges lists the charges the gateway made under idempotencyKey, oldest first: none
// means the charge never happened, one is the answer that was lost, more than one means a
// double charge (a provider without idempotency).
func (c *GatewayClient) FindCharges(ctx context.Context, idempotencyKey string) ([]GatewayCharge, error) {
	var list struct {
		Data []GatewayCharge `json:"data"`
	}
	path := "/v1/charges?idempotency_key=" + url.QueryEscape(idempotencyKey)
	if err := c.call(ctx, http.MethodGet, path, nil, "", &list); err != nil {
		return nil, fmt.Errorf("find charges: %w", err)
	}
	return list.Data, nil
}

// GetCharge returns one charge; a *GatewayError with Status 404 if there is none.
func (c *GatewayClient) GetCharge(ctx context.Context, id string) (GatewayCharge, error) {
	var ch GatewayCharge
	if err := c.call(ctx, http.MethodGet, "/v1/charges/"+url.PathEscape(id), nil, "", &ch); err != nil {
		return ch, fmt.Errorf("get charge %s: %w", id, err)
	}
	return ch, nil
}

// Refund refunds a succeeded charge in full and returns it. idempotencyKey is required and
// must be derived from what is being repaired (models.RefundKeyFor), never made up per call:
// a provider that keeps idempotency for refunds answers a repeat under the same key with the
// first refund, so a second click, a retry or a second operator refunds once. The fake
// gateway refunds a charge at most once anyway and answers a second refund with a
// *GatewayError whose Code is "charge_already_refunded" (see AlreadyRefunded). Like Charge,
// the request is sent exactly once.
func (c *GatewayClient) Refund(ctx context.Context, chargeID, idempotencyKey string) (GatewayCharge, error) {
	var ch GatewayCharge
	if idempotencyKey == "" {
		return ch, errors.New("refund: idempotency key is required")
	}
	if err := c.call(ctx, http.MethodPost, "/v1/charges/"+url.PathEscape(chargeID)+"/refunds", []byte("{}"), idempotencyKey, &ch); err != nil {
		return ch, fmt.Errorf("refund charge %s: %w", chargeID, err)
	}
	return ch, nil
}

// AlreadyRefunded reports whether err is the gateway's answer to refunding a charge that is
// refunded already: for a repair, the refund is done.
func AlreadyRefunded(err error) bool {
	var gwErr *GatewayError
	return errors.As(err, &gwErr) && gwErr.Code == "charge_already_refunded"
}

// call sends one request (with idemKey as its Idempotency-Key, if set) and decodes a 2xx
// answer into out; other answers are *GatewayError.
func (c *GatewayClient) call(ctx context.Context, method, path string, body []byte, idemKey string, out any) error {
	status, respBody, _, err := c.do(ctx, method, path, body, idemKey)
	if err != nil {
		return err
	}
	if status < 200 || status >= 300 {
		return gatewayError(status, respBody)
	}
	if err := json.Unmarshal(respBody, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}

// do sends one request and reads the whole answer. It never retries.
func (c *GatewayClient) do(ctx context.Context, method, path string, body []byte, idemKey string) (int, []byte, http.Header, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	// ONE attempt per call. net/http resends a request on its own when a kept-alive connection
	// turns out to be dead, if it may (an Idempotency-Key header makes a POST "replayable")
	// and if it can rewind the body. Without GetBody it cannot, so a charge whose connection
	// dies is reported as the Unknown outcome it is, never silently sent again.
	// (A GET, having no body, may still be resent that way: a read is harmless to repeat.)
	req.GetBody = nil
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		// The status arrived but the body was cut off: the answer is incomplete.
		return 0, nil, nil, fmt.Errorf("read answer: %w", err)
	}
	return resp.StatusCode, respBody, resp.Header, nil
}

func gatewayError(status int, body []byte) *GatewayError {
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(body, &e) // a non-JSON error page still has a status
	if e.Error == "" {
		e.Error = http.StatusText(status)
	}
	return &GatewayError{Status: status, Code: e.Error, Message: e.Message}
}
