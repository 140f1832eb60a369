package payments

import (
	"errors"
	"fmt"
	"net/http"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Errors of WebhookVerifier.Verify. The webhook handler answers 400 to all of them (a sender
// may retry a stale message with a fresh timestamp), but logs which one it was.
var (
	// ErrWebhookMissingHeaders: webhook-id, webhook-timestamp or webhook-signature is missing
	// or unreadable.
	ErrWebhookMissingHeaders = errors.New("webhook: missing or malformed signature headers")
	// ErrWebhookStale: the timestamp is more than 5 minutes from now (either way), so the
	// message may be a replay.
	ErrWebhookStale = errors.New("webhook: timestamp outside the 5-minute tolerance")
	// ErrWebhookBadSignature: no v1 signature in the header matches the body under any of our
	// secrets. The body may have been tampered with, or the secrets differ.
	ErrWebhookBadSignature = errors.New("webhook: no matching signature")
)

// WebhookVerifier checks Standard Webhooks signatures with the spec's reference library:
// HMAC-SHA256 over "id.timestamp.body", compared in constant time, with a 5-minute tolerance
// on the timestamp.
//
// During a secret rotation a message may carry several signatures ("v1,old v1,new"); it
// passes if any matches. The verifier may also hold several secrets (new and old), so
// messages signed only with the old secret keep passing until the rotation is over.
type WebhookVerifier struct {
	hooks []*standardwebhooks.Webhook
}

// NewWebhookVerifier returns a verifier for one or more "whsec_" + base64 secrets. It returns
// an error if none is given or one is malformed.
func NewWebhookVerifier(secrets ...string) (*WebhookVerifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("webhook verifier: at least one secret is required")
	}
	v := &WebhookVerifier{}
	for i, s := range secrets {
		if s == "" {
			return nil, fmt.Errorf("webhook verifier: secret %d is empty", i+1)
		}
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			// The library's error would not contain the secret, but we do not even risk it.
			return nil, fmt.Errorf("webhook verifier: secret %d is not whsec_ followed by base64", i+1)
		}
		v.hooks = append(v.hooks, wh)
	}
	return v, nil
}

// Verify checks payload against the signature headers. It returns nil for an authentic,
// fresh message, or ErrWebhookMissingHeaders, ErrWebhookStale or ErrWebhookBadSignature.
// Headers are checked first, then the timestamp, then the signature.
func (v *WebhookVerifier) Verify(payload []byte, headers http.Header) error {
	var err error
	for _, wh := range v.hooks {
		err = wh.Verify(payload, headers)
		if err == nil {
			return nil
		}
		switch {
		case errors.Is(err, standardwebhooks.ErrRequiredHeaders), errors.Is(err, standardwebhooks.ErrInvalidHeaders):
			return ErrWebhookMissingHeaders
		case errors.Is(err, standardwebhooks.ErrMessageTooOld), errors.Is(err, standardwebhooks.ErrMessageTooNew):
			return ErrWebhookStale
		}
		// ErrNoMatchingSignature: try the next secret.
	}
	return ErrWebhookBadSignature
}
