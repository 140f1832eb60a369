package fakegateway_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"checkoutlab/fakegateway"
)

func TestSchemaFilesMatchAcrossDialects(t *testing.T) {
	names := func(dialect string) []string {
		entries, err := os.ReadDir("../migrations/gateway/" + dialect)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	if pg, lite := names("postgres"), names("sqlite"); !slices.Equal(pg, lite) {
		t.Errorf("got postgres %v and sqlite %v, want the same migrations", pg, lite)
	}
}

// The constraints that keep the ledger honest are in SQL; this proves they bite on both
// databases, whatever the Go code does.
func TestSchemaConstraints(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		db := mustStore(t, dialect).mustOpen(t)
		now := time.Now().UTC()
		mustExec := func(sql string, args ...any) {
			t.Helper()
			if err := db.Exec(sql, args...).Error; err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
		mustExec(`INSERT INTO gw_payment_methods (id, last4, brand, behaviour, created_at) VALUES ('pm_1', '4242', 'visa', 'succeed', ?)`, now)
		mustExec(`INSERT INTO gw_charges (id, idempotency_key, amount, currency, status, payment_method_id, created_at)
			VALUES ('ch_1', 'k1', 100, 'EUR', 'succeeded', 'pm_1', ?)`, now)
		mustExec(`INSERT INTO gw_idempotency_keys (key, fingerprint, charge_id, status_code, created_at) VALUES ('k1', ?, 'ch_1', 201, ?)`,
			"0000000000000000000000000000000000000000000000000000000000000000", now)
		mustExec(`INSERT INTO gw_events (id, type, charge_id, payload, created_at) VALUES ('evt_1', 'charge.succeeded', 'ch_1', '{}', ?)`, now)
		mustExec(`INSERT INTO gw_deliveries (event_id, reason, status, next_attempt_at, created_at) VALUES ('evt_1', 'original', 'pending', ?, ?)`, now, now)
		bad := map[string]string{
			"ZeroAmount":            `INSERT INTO gw_charges (id, idempotency_key, amount, currency, status, payment_method_id, created_at) VALUES ('ch_2', 'k2', 0, 'EUR', 'succeeded', 'pm_1', ?)`,
			"LowerCaseCurrency":     `INSERT INTO gw_charges (id, idempotency_key, amount, currency, status, payment_method_id, created_at) VALUES ('ch_2', 'k2', 1, 'eur', 'succeeded', 'pm_1', ?)`,
			"UnknownStatus":         `INSERT INTO gw_charges (id, idempotency_key, amount, currency, status, payment_method_id, created_at) VALUES ('ch_2', 'k2', 1, 'EUR', 'maybe', 'pm_1', ?)`,
			"FailedWithoutCode":     `INSERT INTO gw_charges (id, idempotency_key, amount, currency, status, payment_method_id, created_at) VALUES ('ch_2', 'k2', 1, 'EUR', 'failed', 'pm_1', ?)`,
			"SucceededWithCode":     `INSERT INTO gw_charges (id, idempotency_key, amount, currency, status, failure_code, payment_method_id, created_at) VALUES ('ch_2', 'k2', 1, 'EUR', 'succeeded', 'card_declined', 'pm_1', ?)`,
			"RefundedWithoutTime":   `INSERT INTO gw_charges (id, idempotency_key, amount, currency, status, payment_method_id, created_at) VALUES ('ch_2', 'k2', 1, 'EUR', 'refunded', 'pm_1', ?)`,
			"UnknownPaymentMethod":  `INSERT INTO gw_charges (id, idempotency_key, amount, currency, status, payment_method_id, created_at) VALUES ('ch_2', 'k2', 1, 'EUR', 'succeeded', 'pm_nope', ?)`,
			"DuplicateKey":          `INSERT INTO gw_idempotency_keys (key, fingerprint, charge_id, status_code, created_at) VALUES ('k1', '0000000000000000000000000000000000000000000000000000000000000000', 'ch_1', 201, ?)`,
			"UnknownFault":          `INSERT INTO gw_faults (fault, times, remaining, probability, seed, created_at) VALUES ('meteor', 1, 1, 1, 0, ?)`,
			"RemainingAboveTimes":   `INSERT INTO gw_faults (fault, times, remaining, probability, seed, created_at) VALUES ('latency', 1, 2, 1, 0, ?)`,
			"ZeroProbability":       `INSERT INTO gw_faults (fault, times, remaining, probability, seed, created_at) VALUES ('latency', 1, 1, 0, 0, ?)`,
			"UnknownEventType":      `INSERT INTO gw_events (id, type, charge_id, payload, created_at) VALUES ('evt_2', 'charge.maybe', 'ch_1', '{}', ?)`,
			"UnknownDeliveryStatus": `INSERT INTO gw_deliveries (event_id, reason, status, next_attempt_at, created_at) SELECT 'evt_1', 'original', 'lost', created_at, ? FROM gw_charges`,
		}
		for name, sql := range bad {
			t.Run(name, func(t *testing.T) {
				if err := db.Exec(sql, now).Error; err == nil {
					t.Errorf("got nil, want a constraint violation")
				}
			})
		}
	})
}

// The gateway migrates itself, into a version table of its own. Databases made by earlier
// versions of this program recorded their gateway migrations in gateway_schema_migrations, so
// that name must not change: a new binary would otherwise replay version 1 over existing
// tables and fail to start.
func TestMigrationsKeepTheirVersionTable(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		s := mustStore(t, dialect)
		db := s.mustOpen(t)
		var applied int64
		if err := db.Raw(`SELECT count(*) FROM gateway_schema_migrations WHERE version_id = 1 AND is_applied`).Scan(&applied).Error; err != nil {
			t.Fatal(err)
		}
		if applied != 1 {
			t.Errorf("got %d applied rows for version 1, want 1", applied)
		}
		if err := fakegateway.Migrate(context.Background(), db); err != nil {
			t.Errorf("second Migrate: got %v, want nil (nothing to apply)", err)
		}
		s.mustOpen(t) // opening again migrates again: a restart
	})
}

func TestOpenDBRefusesAnotherDatabase(t *testing.T) {
	_, err := fakegateway.OpenDB(context.Background(), "mysql://user:secret@db/gw", t.TempDir())
	if err == nil {
		t.Fatal("got nil, want an error for a mysql:// URL")
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q repeats the URL's password", err)
	}
}
