package payments

import (
	"fmt"
	"os"
)

// Crash points for failure drills (SHOP_CRASH_AT), in the order an operation reaches them.
const (
	// The key is decided ours; nothing is written. A fresh key's row is inserted by the first
	// phase's transaction, so a crash here leaves no row at all: the retry finds the key
	// absent and runs from the beginning at once, and the completer has nothing to drop. The
	// drill checks exactly that: nothing half done, one order, one charge.
	CrashAfterKeyReserved   = "after_key_reserved"
	CrashAfterOrderCreated  = "after_order_created"  // order and pending payment are committed
	CrashAfterGatewayCharge = "after_gateway_charge" // the gateway has answered; we recorded nothing
	CrashBeforeResponse     = "before_response"      // the outcome is committed; the client has no answer
)

// CrashPoints lists every crash point.
var CrashPoints = []string{CrashAfterKeyReserved, CrashAfterOrderCreated, CrashAfterGatewayCharge, CrashBeforeResponse}

// Crasher returns a function that kills this process, abruptly, when an operation reaches
// point. It sends SIGKILL to itself: no deferred function runs, no transaction is rolled back
// politely, no response is written — exactly as if the machine had lost power. An empty point
// returns nil (no drills).
func Crasher(point string) func(string) {
	if point == "" {
		return nil
	}
	return func(reached string) {
		if reached != point {
			return
		}
		fmt.Fprintf(os.Stderr, "checkoutlab: SHOP_CRASH_AT=%s reached: killing the process\n", point)
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			_ = p.Kill()
		}
		select {} // the signal is on its way; never carry on past a crash point
	}
}
