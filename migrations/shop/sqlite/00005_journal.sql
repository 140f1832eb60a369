-- The journal: what happened to each operation, recorded by the code paths that did it — key
-- reservations and their answers, phases and recovery points, gateway calls and their
-- classified outcome, webhook decisions, outbox deliveries, completer claims. It is the ops
-- view of an order ("What happened" on the order page) and the raw material of the failure
-- lab's timelines. Events are appended, never updated; id is the order they were written in.
-- Details never hold card numbers, e-mail addresses or secrets.

-- +goose Up
CREATE TABLE journal_events (
    id              integer PRIMARY KEY AUTOINCREMENT,
    tenant_id       text NOT NULL,
    idempotency_key text,
    order_id        text,
    payment_id      text,
    actor           text NOT NULL CHECK (actor IN ('client', 'shop', 'database', 'gateway', 'webhook', 'outbox', 'completer')),
    kind            text NOT NULL,
    detail          text NOT NULL DEFAULT '',
    at              datetime NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);
CREATE INDEX journal_events_order ON journal_events (order_id, id);
CREATE INDEX journal_events_key ON journal_events (tenant_id, idempotency_key, id);

-- +goose Down
DROP TABLE journal_events;
