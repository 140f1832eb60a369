package handlers

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/labstack/echo/v4"
)

// Signer makes and checks the HMACs the shop hands to browsers: the session cookie (so that
// only ids the server made are accepted), the operator's session, and the signed order link a
// receipt carries. Each use signs under its own purpose, so a value signed for one can never
// pass for another.
//
// Every process of one shop — replicas on one database, and the same shop after a restart —
// must share the secret, or each rejects the others' cookies and links.
type Signer struct{ key []byte }

// MinSecretBytes is the shortest secret NewSigner accepts: 256 bits, the size of the HMAC.
const MinSecretBytes = 32

// NewSigner returns a Signer keyed by secret, which must hold at least MinSecretBytes bytes.
func NewSigner(secret []byte) (*Signer, error) {
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("signing secret: want at least %d bytes, got %d", MinSecretBytes, len(secret))
	}
	return &Signer{key: append([]byte(nil), secret...)}, nil
}

// NewRandomSigner returns a Signer with a key made now, known to this process only: sessions
// and links it signs end with the process. NewRouter uses one unless WithSigner gives the
// shop's own; tests use it freely.
func NewRandomSigner() *Signer {
	key := make([]byte, MinSecretBytes)
	_, _ = rand.Read(key)
	return &Signer{key: key}
}

// LoadOrCreateSecret returns the secret stored in the file at path, or makes a random one of
// MinSecretBytes and stores it there (mode 0600) first. The secret lives beside the embedded
// database, never in it, so a copy of the database alone cannot forge a cookie or a link.
func LoadOrCreateSecret(path string) ([]byte, error) {
	if b, err := os.ReadFile(path); err == nil {
		secret, derr := base64.RawURLEncoding.DecodeString(strings.TrimSpace(string(b)))
		if derr != nil || len(secret) < MinSecretBytes {
			return nil, fmt.Errorf("secret file %s: not a base64url secret of at least %d bytes", path, MinSecretBytes)
		}
		return secret, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read secret file: %w", err)
	}
	secret := make([]byte, MinSecretBytes)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("make secret: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create secret dir: %w", err)
	}
	// Written whole to a temporary file, then linked into place, which fails if the file is
	// there already: two processes starting at once on one DATA_DIR agree on the first one's
	// secret, and neither ever reads a half-written file.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secret-*")
	if err != nil {
		return nil, fmt.Errorf("create secret file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(base64.RawURLEncoding.EncodeToString(secret) + "\n")
	if serr := tmp.Sync(); werr == nil {
		werr = serr
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, fmt.Errorf("write secret file: %w", werr)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, os.ErrExist) {
		return LoadOrCreateSecret(path)
	} else if err != nil {
		return nil, fmt.Errorf("create secret file: %w", err)
	}
	return secret, nil
}

// Purposes a Signer signs for.
const (
	signSession    = "session"
	signOpsSession = "ops-session"
	signOpsLogin   = "ops-login"
	signOrderLink  = "order-link"
)

func (s *Signer) mac(purpose, msg string) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(purpose))
	h.Write([]byte{0}) // a purpose can never run into its message
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// Sign returns the signature of msg for purpose, in URL- and cookie-safe base64.
func (s *Signer) Sign(purpose, msg string) string {
	return base64.RawURLEncoding.EncodeToString(s.mac(purpose, msg))
}

// Valid reports whether sig is the signature of msg for purpose. It compares in constant time.
func (s *Signer) Valid(purpose, msg, sig string) bool {
	got, err := base64.RawURLEncoding.DecodeString(sig)
	return err == nil && hmac.Equal(got, s.mac(purpose, msg))
}

// OrderLink returns the path of an order's page signed for anyone who holds it: the link a
// receipt carries. Without the signature the page opens only for the browser session that
// placed the order.
func (s *Signer) OrderLink(orderID string) string {
	return "/orders/" + url.PathEscape(orderID) + "?sig=" + s.Sign(signOrderLink, orderID)
}

// validOrderLink reports whether sig is the order link signature of orderID.
func (s *Signer) validOrderLink(orderID, sig string) bool {
	return sig != "" && s.Valid(signOrderLink, orderID, sig)
}

const ctxSigner = "signer"

// signerOf returns the router's Signer, which NewRouter puts on every request.
func signerOf(c echo.Context) (*Signer, error) {
	s, _ := c.Get(ctxSigner).(*Signer)
	if s == nil {
		return nil, errors.New("no signer on the request: build the router with NewRouter")
	}
	return s, nil
}
