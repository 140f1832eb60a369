-- The gateway page's fault history: a fault is disarmed rather than deleted, so spent and
-- disarmed faults stay listed, and every strike is recorded with the charge it struck.

-- +goose Up
ALTER TABLE gw_faults ADD COLUMN disarmed_at timestamptz;

-- One row per strike of a fault: an armed one (fault_id) or a test card's own (fault_id NULL,
-- the card's behaviour in fault). charge_id is '' when it struck before any charge existed
-- (error_before_commit, timeout_before_commit); the idempotency key then tells which request.
CREATE TABLE gw_fault_hits (
    id              bigserial PRIMARY KEY,
    fault_id        bigint REFERENCES gw_faults (id),
    fault           text NOT NULL,
    charge_id       text NOT NULL DEFAULT '',
    idempotency_key text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL
);
CREATE INDEX gw_fault_hits_charge ON gw_fault_hits (charge_id);
CREATE INDEX gw_fault_hits_fault ON gw_fault_hits (fault_id);

-- +goose Down
DROP TABLE gw_fault_hits;
ALTER TABLE gw_faults DROP COLUMN disarmed_at;
