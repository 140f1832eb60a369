package fakegateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Serve runs the gateway on ln until ctx ends: the HTTP API and the webhook sender. Then it
// shuts down gracefully: hanging fault handlers are released, requests in flight finish (up
// to 10 s), the sender stops and pending deliveries stay in the database for the next start.
// It returns nil after a shutdown caused by ctx, or the error that stopped the server.
//
// This is all cmd/fakegateway does with a gateway, and what cmd/shop calls to run the gateway
// in its own process on its own listener.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	// No write timeout: the delay and timeout faults hold responses back on purpose.
	srv := &http.Server{
		Handler:           g.Handler(),
		ReadHeaderTimeout: g.cfg.ReadHeaderTimeout,
		ReadTimeout:       g.cfg.ReadTimeout,
		IdleTimeout:       g.cfg.IdleTimeout,
	}
	senderDone := make(chan struct{})
	go func() { defer close(senderDone); g.Start(ctx) }()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	g.log.Info("fakegateway serving", "addr", ln.Addr().String(), "webhook_url", g.cfg.WebhookURL,
		"control_token", g.cfg.ControlToken != "")

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("serve gateway: %w", err)
	}
	_ = g.Close()
	<-senderDone
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if shutErr := srv.Shutdown(shutdownCtx); shutErr != nil && err == nil {
		err = fmt.Errorf("shut down gateway: %w", shutErr)
	}
	if err == nil {
		if sErr := <-serveErr; sErr != nil && !errors.Is(sErr, http.ErrServerClosed) {
			err = fmt.Errorf("serve gateway: %w", sErr)
		}
	}
	g.log.Info("fakegateway stopped")
	return err
}
