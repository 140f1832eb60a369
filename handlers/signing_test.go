package handlers_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"checkoutlab/handlers"
)

// TestLoadOrCreateSecret: the first start makes a secret and keeps it (0600) beside the
// database; every later start, and a second process, reads the same one back.
func TestLoadOrCreateSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "shop.secret")
	first, err := handlers.LoadOrCreateSecret(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) < handlers.MinSecretBytes {
		t.Errorf("got a %d-byte secret, want at least %d", len(first), handlers.MinSecretBytes)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("secret file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	again, err := handlers.LoadOrCreateSecret(path)
	if err != nil || !bytes.Equal(again, first) {
		t.Errorf("second start: got a different secret (%v)", err)
	}
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := handlers.LoadOrCreateSecret(path); err == nil {
		t.Errorf("a damaged secret file was accepted")
	}
}

// TestSigner: a signature holds for its purpose and message under its key only.
func TestSigner(t *testing.T) {
	if _, err := handlers.NewSigner([]byte("too short")); err == nil {
		t.Errorf("NewSigner accepted a 9-byte secret")
	}
	secret := bytes.Repeat([]byte{7}, handlers.MinSecretBytes)
	a, err := handlers.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := handlers.NewSigner(secret)
	sig := a.Sign("order-link", "ord_1")
	for _, c := range []struct {
		name              string
		s                 *handlers.Signer
		purpose, msg, sig string
		want              bool
	}{
		{"SameKey", b, "order-link", "ord_1", sig, true},
		{"OtherKey", handlers.NewRandomSigner(), "order-link", "ord_1", sig, false},
		{"OtherPurpose", b, "session", "ord_1", sig, false},
		{"OtherMessage", b, "order-link", "ord_2", sig, false},
		{"NotBase64", b, "order-link", "ord_1", "!!", false},
	} {
		if got := c.s.Valid(c.purpose, c.msg, c.sig); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}
