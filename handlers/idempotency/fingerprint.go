package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Fingerprint identifies what a request asks for, independently of how it is spelled.
//
// Params is the canonical JSON of the endpoint's significant fields: fixed key order, no white
// space, numbers as Go prints a float64 (1, 1.0 and 1e0 all become 1), free fields such as
// "metadata" or "note" left out. Hash is the SHA-256 of Params, in hex. Two requests under one
// key are "the same operation" exactly when their hashes are equal. Params is stored with the
// key, for inspection; it must therefore never contain a card number.
type Fingerprint struct {
	Hash   string
	Params []byte
}

// FingerprintOf hashes the canonical form v. v must be a struct (fixed field order) or contain
// only structs, slices, strings and numbers, so that its JSON is deterministic.
func FingerprintOf(v any) (Fingerprint, error) {
	params, err := json.Marshal(v)
	if err != nil {
		return Fingerprint{}, fmt.Errorf("encode canonical request: %w", err)
	}
	sum := sha256.Sum256(params)
	return Fingerprint{Hash: hex.EncodeToString(sum[:]), Params: params}, nil
}
