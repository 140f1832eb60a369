package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"checkoutlab/models"
	"checkoutlab/payments"
)

// WebhookVerifier checks a webhook's Standard Webhooks signature. *payments.WebhookVerifier is one.
type WebhookVerifier interface {
	Verify(payload []byte, headers http.Header) error
}

// EventProcessor applies a verified gateway event. *payments.WebhookProcessor is one.
type EventProcessor interface {
	Process(ctx context.Context, ev payments.GatewayEvent) (decision string, duplicate bool, err error)
}

// Webhooks receives the gateway's events.
type Webhooks struct {
	Verifier  WebhookVerifier
	Processor EventProcessor
}

// Routes mounts POST /webhooks/gateway.
func (h *Webhooks) Routes(e *echo.Echo) {
	e.POST("/webhooks/gateway", h.receive).Name = "webhooks.gateway"
}

// receive verifies, then processes, then answers. It answers 2xx only after the event's effect
// is committed, so the gateway keeps retrying until the shop really has it; a duplicate is a
// 2xx no-op. A forged or stale message has no effect at all: 401 for a signature that does
// not match, 400 for missing headers or a timestamp outside the 5-minute tolerance.
func (h *Webhooks) receive(c echo.Context) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return models.ErrUnreadableBody.Wrap(err)
	}
	if err := h.Verifier.Verify(body, c.Request().Header); err != nil {
		switch {
		case errors.Is(err, payments.ErrWebhookBadSignature):
			return models.ErrInvalidSignature
		case errors.Is(err, payments.ErrWebhookStale):
			return models.ErrStaleWebhook
		default:
			return models.ErrMissingSignature
		}
	}
	var ev payments.GatewayEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return models.ErrInvalidJSON.Msgf("the webhook body is not valid JSON")
	}
	decision, duplicate, err := h.Processor.Process(c.Request().Context(), ev)
	if err != nil {
		return err
	}
	if duplicate {
		decision = "duplicate"
	}
	return writeJSON(c, http.StatusOK, map[string]any{"received": true, "duplicate": duplicate, "decision": decision})
}
