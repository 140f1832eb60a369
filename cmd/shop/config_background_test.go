package main

import (
	"io"
	"testing"

	"checkoutlab/fakegateway"
	"checkoutlab/models"
)

// TestLoadConfigBackground: the pool, job workers and webhook senders have their documented
// defaults, take a value given, and refuse a nonsensical one.
func TestLoadConfigBackground(t *testing.T) {
	cfg, err := loadConfig(nil, envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DBPoolSize != models.PostgresPoolSize || cfg.JobWorkers != 0 || cfg.WebhookSenders != fakegateway.DefaultSenders {
		t.Errorf("got pool %d, workers %d, senders %d; want %d, 0 (sized to the pool), %d",
			cfg.DBPoolSize, cfg.JobWorkers, cfg.WebhookSenders, models.PostgresPoolSize, fakegateway.DefaultSenders)
	}
	cfg, err = loadConfig([]string{"-job-workers", "3"}, envOf(map[string]string{"DB_POOL_SIZE": "7", "WEBHOOK_SENDERS": "2"}), io.Discard)
	if err != nil || cfg.DBPoolSize != 7 || cfg.JobWorkers != 3 || cfg.WebhookSenders != 2 {
		t.Errorf("got pool %d, workers %d, senders %d (%v); want 7, 3, 2", cfg.DBPoolSize, cfg.JobWorkers, cfg.WebhookSenders, err)
	}
	for name, v := range map[string]string{"DB_POOL_SIZE": "0", "JOB_WORKERS": "-1", "WEBHOOK_SENDERS": "many"} {
		if _, err := loadConfig(nil, envOf(map[string]string{name: v}), io.Discard); err == nil {
			t.Errorf("%s=%s: got no error", name, v)
		}
	}
}
