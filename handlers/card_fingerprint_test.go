package handlers_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"gorm.io/gorm"

	"checkoutlab/models"
	"checkoutlab/models/modelstest"
)

// TestCardFingerprintNeedsTheShopSecret: what the idempotency key keeps of a card is an HMAC
// that nobody can compute without the shop's own secret. A card number has so few unknown
// digits (the last four are stored beside it) that an HMAC under any key an attacker can know
// — the webhook secret, shared with the gateway and public in the demo — is reversed by trying
// them all. So the stored value must not be the HMAC under a key derived from WEBHOOK_SECRET,
// as it once was.
func TestCardFingerprintNeedsTheShopSecret(t *testing.T) {
	modelstest.ForEachDialect(t, func(t *testing.T, db *gorm.DB) {
		s := MustDeskShop(t, db)
		const card = "4242424242424242"
		a := s.call(t, http.MethodPost, "/api/v1/checkout", "sk_test_acme", "fp-key", `{"items":[{"sku":"camp-mug","quantity":1}],`+
			`"email":"fp@example.com","shipping_address":{"name":"Ada","address":"1 Way","city":"London","postal_code":"N1","country":"GB"},`+
			`"card_number":"`+card+`"}`)
		if a.status != http.StatusCreated {
			t.Fatalf("checkout: got %d %s, want 201", a.status, a.raw)
		}
		var rec models.IdempotencyRecord
		if err := db.Where("tenant_id = ? AND key = ?", "acme", "fp-key").Take(&rec).Error; err != nil {
			t.Fatal(err)
		}
		if strings.Contains(rec.RequestParams, card) || strings.Contains(rec.RequestParams, "4242 4242") {
			t.Fatalf("the stored parameters hold the card number: %s", rec.RequestParams)
		}
		if !strings.Contains(rec.RequestParams, `"card_hmac":"`) {
			t.Fatalf("got stored parameters %s, want a card_hmac", rec.RequestParams)
		}
		// What someone holding the database and the webhook secret would compute.
		for _, webhookSecret := range []string{"whsec_test", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"} {
			if guess := oldCardHMAC(webhookSecret, card); strings.Contains(rec.RequestParams, guess) {
				t.Errorf("the stored card_hmac is the HMAC under a key derived from WEBHOOK_SECRET %q: reversible", webhookSecret)
			}
		}
	})
}

// oldCardHMAC is the fingerprint as it was keyed before: from the webhook secret.
func oldCardHMAC(webhookSecret, card string) string {
	k := hmac.New(sha256.New, []byte(webhookSecret))
	k.Write([]byte("checkoutlab card fingerprint v1"))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write([]byte(card))
	return hex.EncodeToString(m.Sum(nil))
}
