-- Payments, webhooks and their side effects.

-- +goose Up

-- At most one payment of an order may be in flight: a second attempt under a new key while the
-- first one's outcome is unknown would be a second charge waiting to happen.
CREATE UNIQUE INDEX payments_one_pending_per_order ON payments (order_id) WHERE status = 'pending';

-- Every gateway event we have processed, recorded in the same transaction as the state change it
-- caused. A redelivered event finds its id here and changes nothing.
CREATE TABLE webhook_events (
    event_id    text PRIMARY KEY,
    type        text NOT NULL,
    charge_id   text NOT NULL,
    payment_id  text,
    -- What processing decided: applied (a status moved), no_change (the status was already
    -- there or beyond), unknown_payment (not ours).
    decision    text NOT NULL CHECK (decision IN ('applied', 'no_change', 'unknown_payment')),
    received_at datetime NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- The local mailbox: receipts the shop "sends" are delivered here and shown at /mailbox.
-- dedupe_key makes delivery idempotent on the receiving side: a job that runs twice delivers
-- one message. (The failure lab's "no dedupe" switch leaves it NULL to show the difference.)
CREATE TABLE mailbox_messages (
    id          integer PRIMARY KEY AUTOINCREMENT,
    tenant_id   text NOT NULL REFERENCES tenants (id),
    order_id    text NOT NULL REFERENCES orders (id),
    kind        text NOT NULL CHECK (kind IN ('receipt')),
    to_address  text NOT NULL,
    subject     text NOT NULL,
    body        text NOT NULL,
    dedupe_key  text UNIQUE,
    created_at  datetime NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX mailbox_messages_tenant ON mailbox_messages (tenant_id, created_at);

-- Shipment requests handed to the (simulated) warehouse, deduplicated the same way.
CREATE TABLE shipments (
    id          integer PRIMARY KEY AUTOINCREMENT,
    tenant_id   text NOT NULL REFERENCES tenants (id),
    order_id    text NOT NULL REFERENCES orders (id),
    status      text NOT NULL DEFAULT 'requested' CHECK (status IN ('requested')),
    dedupe_key  text UNIQUE,
    created_at  datetime NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX shipments_order ON shipments (order_id);
CREATE INDEX mailbox_messages_order ON mailbox_messages (order_id);

-- +goose Down
DROP TABLE shipments;
DROP TABLE mailbox_messages;
DROP TABLE webhook_events;
DROP INDEX payments_one_pending_per_order;
