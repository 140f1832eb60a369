package payments_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"checkoutlab/payments"
)

const (
	oldSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	newSecret = "whsec_c2VjcmV0LWZvci1yb3RhdGlvbi10ZXN0cy0xMjM="
)

var payload = []byte(`{"id":"evt_1","type":"charge.succeeded","created":1,"data":{"charge":{"id":"ch_1","amount":1000}}}`)

// signed returns the headers of payload signed at ts with every secret, as a sender does
// during a rotation.
func signed(t *testing.T, ts time.Time, secrets ...string) http.Header {
	t.Helper()
	h := http.Header{}
	h.Set("webhook-id", "evt_1")
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	sig := ""
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			t.Fatal(err)
		}
		one, err := wh.Sign("evt_1", ts, payload)
		if err != nil {
			t.Fatal(err)
		}
		if sig != "" {
			sig += " "
		}
		sig += one
	}
	h.Set("webhook-signature", sig)
	return h
}

func mustVerifier(t *testing.T, secrets ...string) *payments.WebhookVerifier {
	t.Helper()
	v, err := payments.NewWebhookVerifier(secrets...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestWebhookVerifier(t *testing.T) {
	now := time.Now()
	v := mustVerifier(t, newSecret)
	cases := []struct {
		name    string
		v       *payments.WebhookVerifier
		body    []byte
		headers http.Header
		want    error
	}{
		{"OK", v, payload, signed(t, now, newSecret), nil},
		{"OKWithinTolerance", v, payload, signed(t, now.Add(-4*time.Minute), newSecret), nil},
		{"OKRotationOldAndNewSignature", v, payload, signed(t, now, oldSecret, newSecret), nil},
		{"OKRotationVerifierKnowsOldSecret", mustVerifier(t, newSecret, oldSecret), payload, signed(t, now, oldSecret), nil},
		{"ErrBadSignatureTamperedBody", v, []byte(`{"id":"evt_1","amount":1}`), signed(t, now, newSecret), payments.ErrWebhookBadSignature},
		{"ErrBadSignatureOtherSecret", v, payload, signed(t, now, oldSecret), payments.ErrWebhookBadSignature},
		{"ErrStaleOld", v, payload, signed(t, now.Add(-10*time.Minute), newSecret), payments.ErrWebhookStale},
		{"ErrStaleFuture", v, payload, signed(t, now.Add(10*time.Minute), newSecret), payments.ErrWebhookStale},
		{"ErrMissingHeaders", v, payload, http.Header{}, payments.ErrWebhookMissingHeaders},
		{"ErrMissingSignature", v, payload, func() http.Header {
			h := signed(t, now, newSecret)
			h.Del("webhook-signature")
			return h
		}(), payments.ErrWebhookMissingHeaders},
		{"ErrMalformedTimestamp", v, payload, func() http.Header {
			h := signed(t, now, newSecret)
			h.Set("webhook-timestamp", "yesterday")
			return h
		}(), payments.ErrWebhookMissingHeaders},
		{"ErrBadSignatureOtherID", v, payload, func() http.Header {
			h := signed(t, now, newSecret)
			h.Set("webhook-id", "evt_2")
			return h
		}(), payments.ErrWebhookBadSignature},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.v.Verify(tc.body, tc.headers)
			if (tc.want == nil && err != nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestNewWebhookVerifier(t *testing.T) {
	for name, secrets := range map[string][]string{
		"ErrNoSecret":  nil,
		"ErrEmpty":     {""},
		"ErrNotBase64": {"whsec_not base64!"},
	} {
		if _, err := payments.NewWebhookVerifier(secrets...); err == nil {
			t.Errorf("%s: got nil, want an error", name)
		}
	}
}
