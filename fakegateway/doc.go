// Package fakegateway is Checkout Lab's fake payment provider: a real HTTP service with its own
// persisted ledger, its own idempotency keys, Standard Webhooks signed events delivered by a
// background sender with retries, and every fault of the lab on demand.
//
// It plays "the other company". It imports no package of the shop: its ids (ids.go), its
// database opening (db.go) and its schema (migrations/gateway, tables prefixed gw_) are its
// own. It can run in its own process (cmd/fakegateway) or inside the shop's process on its
// own listener:
//
//	db, err := fakegateway.OpenDB(ctx, databaseURL, dataDir) // opens and migrates
//	defer fakegateway.CloseDB(db)
//	gw, err := fakegateway.New(fakegateway.Config{DB: db,
//		WebhookURL: shopPublicURL + "/webhooks/gateway", WebhookSecret: secret,
//		ControlToken: controlToken, Logger: log})
//	ln, err := net.Listen("tcp", gatewayAddr)
//	err = gw.Serve(ctx, ln) // API + webhook sender until ctx ends, then a graceful stop
//
// or, to mount it elsewhere: gw.Handler() is the http.Handler, go gw.Start(ctx) runs the
// sender, gw.Close() releases hanging fault handlers and stops the sender.
//
// The provider API (/v1), which a shop calls, needs no credential. The control API (/_control) and the page (/) are the operator's: with
// Config.ControlToken set, a client sends "Authorization: Bearer <token>" and a browser opens
// /?token=<token> once, which sets a session cookie; the page's forms carry a CSRF token of
// that session, and a browser request from another origin that changes anything is refused.
//
// Run one gateway process per database: the sender assumes it is alone, and two senders would
// both send the pending deliveries (harmless for an at-least-once receiver, but confusing to
// watch). Armed faults live in the database (gw_faults) and survive a restart; the random
// source of a fault with probability < 1 lives in memory and restarts from the fault's seed.
//
// Faults strike at an exact point relative to the commit of a charge, which is the whole point:
// a response lost after the commit (commit_then_drop) is a different problem from an error
// before it (error_before_commit), and a client must tell them apart. docs/failure-modes.md
// explains each fault for users.
package fakegateway
