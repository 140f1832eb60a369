-- The triage desk: what an operator (or an API client) decided about a reconciliation finding,
-- and the few columns its actions and the amount check need.

-- +goose Up

-- Every decision taken on the reconciliation desk: who, when, about which order and finding,
-- what the gateway showed at that moment, the action, what it came to, and the reason typed.
-- Rows are appended, never updated. A dismissed suspected duplicate stays dismissed because its
-- decision is here.
CREATE TABLE triage_decisions (
    id         text PRIMARY KEY,
    tenant_id  text NOT NULL REFERENCES tenants (id),
    order_id   text NOT NULL REFERENCES orders (id),
    action     text NOT NULL CHECK (action IN ('check_now', 'refund_extra_charge', 'settle_stuck', 'dismiss_duplicate')),
    findings   text NOT NULL DEFAULT '',
    who        text NOT NULL,
    gateway    text NOT NULL DEFAULT '',
    result     text NOT NULL,
    detail     text NOT NULL DEFAULT '',
    reason     text NOT NULL CHECK (length(reason) BETWEEN 1 AND 500),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX triage_decisions_tenant ON triage_decisions (tenant_id, created_at);
CREATE INDEX triage_decisions_order ON triage_decisions (order_id);

-- A webhook-id is processed once. payload_hash is the SHA-256 of the event as the shop read it,
-- so a later delivery under the same id with a different payload is told apart from a plain
-- redelivery; conflict_at records that it happened, for reconciliation to list.
ALTER TABLE webhook_events ADD COLUMN payload_hash text;
ALTER TABLE webhook_events ADD COLUMN conflict_at timestamptz;

-- When an order's reserved stock was given back. Set by the same conditional UPDATE that
-- returns the stock, so stock comes back once, whoever releases it.
ALTER TABLE orders ADD COLUMN stock_released_at timestamptz;

-- +goose Down
ALTER TABLE orders DROP COLUMN stock_released_at;
ALTER TABLE webhook_events DROP COLUMN conflict_at;
ALTER TABLE webhook_events DROP COLUMN payload_hash;
DROP TABLE triage_decisions;
