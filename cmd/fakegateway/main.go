// Command fakegateway runs Checkout Lab's fake payment gateway on its own: the provider API,
// the control API and its page on GATEWAY_ADDR, with a persisted ledger and a webhook sender
// that delivers to SHOP_PUBLIC_URL/webhooks/gateway.
//
// Configuration (environment, flags mirror the first two):
//
//	GATEWAY_ADDR     listen address (-addr), default 127.0.0.1:8081
//	DATA_DIR         where gateway.db lives without DATABASE_URL (-data-dir), default ./data
//	DATABASE_URL     postgres://… to keep the ledger in PostgreSQL instead
//	SHOP_PUBLIC_URL  where webhooks go (+ /webhooks/gateway), default http:// + SHOP_ADDR
//	SHOP_ADDR        default 127.0.0.1:8080, only used for the default above
//	WEBHOOK_SECRET   Standard Webhooks secret, default fakegateway.DemoWebhookSecret
//	GATEWAY_CONTROL_TOKEN  guards /_control/* (Authorization: Bearer <token>) and the page
//	                 (open /?token=<token> once in a browser); default
//	                 fakegateway.DemoControlToken, with a loud warning in the log
//
// The provider API (/v1) and /healthz need no token.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fakegateway:", err)
		os.Exit(1)
	}
}
