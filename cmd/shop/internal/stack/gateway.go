package stack

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"gorm.io/gorm"

	"checkoutlab/fakegateway"
)

// Gateway is the fake payment gateway running in this process, on its own listener and its
// own database (DATA_DIR/gateway.db, or its gw_ tables in DATABASE_URL), exactly as
// `go run ./cmd/fakegateway` would run it.
type Gateway struct {
	url    string
	cancel context.CancelFunc
	done   chan struct{}
}

// StartGateway starts the fake gateway on cfg.GatewayAddr, its control API and page guarded
// by cfg.GatewayControlToken. It delivers webhooks to cfg.ShopPublicURL + "/webhooks/gateway",
// signed with cfg.WebhookSecret. ctx bounds the start only: the gateway runs until Close.
func StartGateway(ctx context.Context, cfg Config, logger *slog.Logger) (*Gateway, error) {
	db, err := fakegateway.OpenDB(ctx, cfg.DatabaseURL, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	gw, err := fakegateway.New(fakegateway.Config{
		DB:            db,
		WebhookURL:    cfg.ShopPublicURL + "/webhooks/gateway",
		WebhookSecret: cfg.WebhookSecret,
		ControlToken:  cfg.GatewayControlToken,
		Senders:       cfg.WebhookSenders,
		Logger:        logger,
	})
	if err != nil {
		closeDB(db, logger)
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.GatewayAddr)
	if err != nil {
		closeDB(db, logger)
		return nil, fmt.Errorf("listen on GATEWAY_ADDR %s: %w", cfg.GatewayAddr, err)
	}
	serveCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g := &Gateway{url: "http://" + ln.Addr().String(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		defer closeDB(db, logger)
		if err := gw.Serve(serveCtx, ln); err != nil {
			logger.Error("fake gateway stopped", "err", err)
		}
	}()
	return g, nil
}

// URL is the gateway's base URL, with the port it really got.
func (g *Gateway) URL() string { return g.url }

// Close shuts the gateway down gracefully and waits until it has stopped.
func (g *Gateway) Close() {
	g.cancel()
	<-g.done
}

func closeDB(db *gorm.DB, logger *slog.Logger) {
	if err := fakegateway.CloseDB(db); err != nil {
		logger.Warn("close the gateway's database", "err", err)
	}
}
