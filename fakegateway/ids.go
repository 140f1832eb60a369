package fakegateway

import (
	"crypto/rand"
	"strings"
)

// newID returns an unguessable object id with a type prefix, the way a provider names its
// objects ("ch_…", "pm_…", "evt_…"): the prefix tells a reader what the id names, and 24
// random base32 characters (120 bits) make it impossible to guess another customer's.
func newID(prefix string) string {
	return prefix + "_" + strings.ToLower(rand.Text()[:24])
}
