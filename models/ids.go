package models

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewID returns a random, unguessable identifier with a type prefix, e.g. "ord_5tq3…",
// in the manner of Stripe's object ids: the prefix tells a human what the id names.
func NewID(prefix string) string {
	var b [15]byte // 120 bits
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never happens on a supported OS
	}
	return prefix + "_" + strings.ToLower(idEncoding.EncodeToString(b[:]))
}

// HashAPIKey is how API keys are stored: SHA-256, hex. API keys are long random strings, so a
// fast unsalted hash is enough to keep a leaked table from leaking working credentials.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
