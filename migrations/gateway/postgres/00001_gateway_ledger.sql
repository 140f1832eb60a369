-- The fake gateway's own schema: payment methods, the charge ledger with its idempotency keys,
-- armed faults, and the webhook outbox (events, deliveries, attempts). Every table is prefixed
-- gw_ so the gateway can share a PostgreSQL database with the shop without collisions.

-- +goose Up
-- A payment method stands for a card. The card number itself is never stored: only what a
-- real provider would show (last four digits, brand) and the test-card behaviour it carries.
CREATE TABLE gw_payment_methods (
    id         text PRIMARY KEY CHECK (id LIKE 'pm\_%'),
    last4      text NOT NULL CHECK (last4 ~ '^[0-9]{4}$'),
    brand      text NOT NULL,
    behaviour  text NOT NULL DEFAULT 'succeed' CHECK (behaviour IN (
                   'succeed', 'card_declined', 'insufficient_funds', 'commit_then_drop',
                   'commit_then_delay', 'error_before_commit', 'webhook_duplicate', 'webhook_reorder')),
    created_at timestamptz NOT NULL
);

-- The ledger: money that moved (or was refused). Several charges may share an idempotency key
-- only when the ignore_idempotency_key fault was armed; that is the bug the fault shows.
CREATE TABLE gw_charges (
    id                text PRIMARY KEY CHECK (id LIKE 'ch\_%'),
    idempotency_key   text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    amount            bigint NOT NULL CHECK (amount > 0),
    currency          text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    status            text NOT NULL CHECK (status IN ('succeeded', 'failed', 'refunded')),
    -- A failed charge always says why, and only a failed charge has a failure code.
    failure_code      text NOT NULL DEFAULT '' CHECK ((status = 'failed') = (failure_code <> '')),
    payment_method_id text NOT NULL REFERENCES gw_payment_methods (id),
    metadata          text NOT NULL DEFAULT '{}',
    order_id          text NOT NULL DEFAULT '', -- metadata.order_id, copied for the ledger page
    created_at        timestamptz NOT NULL,
    refunded_at       timestamptz,
    CHECK ((status = 'refunded') = (refunded_at IS NOT NULL))
);
CREATE INDEX gw_charges_idempotency_key ON gw_charges (idempotency_key);
CREATE INDEX gw_charges_created ON gw_charges (created_at, id);

-- The gateway's own idempotency: the first request under a key claims it with
-- INSERT … ON CONFLICT DO NOTHING; everyone after reads the stored outcome. The charge is
-- inserted in the same transaction, after the claim, hence the deferred foreign key.
CREATE TABLE gw_idempotency_keys (
    key         text PRIMARY KEY CHECK (length(key) BETWEEN 1 AND 255),
    -- SHA-256 of amount, currency and payment source: a reuse with other parameters is refused.
    fingerprint text NOT NULL CHECK (length(fingerprint) = 64),
    charge_id   text NOT NULL REFERENCES gw_charges (id) DEFERRABLE INITIALLY DEFERRED,
    status_code integer NOT NULL CHECK (status_code IN (201, 402)),
    created_at  timestamptz NOT NULL
);

-- A test card's fault strikes once per idempotency key. Faults that strike before the commit
-- leave no charge behind, so the strike itself is remembered here.
CREATE TABLE gw_fault_strikes (
    idempotency_key text PRIMARY KEY,
    behaviour       text NOT NULL,
    created_at      timestamptz NOT NULL
);

-- Faults armed through /_control/faults. remaining counts down as the fault strikes.
CREATE TABLE gw_faults (
    id          bigserial PRIMARY KEY,
    fault       text NOT NULL CHECK (fault IN (
                    'latency', 'error_before_commit', 'timeout_before_commit', 'commit_then_drop',
                    'commit_then_delay', 'commit_then_error', 'decline', 'webhook_duplicate',
                    'webhook_reorder', 'webhook_delay', 'webhook_fail', 'ignore_idempotency_key')),
    times       integer NOT NULL CHECK (times BETWEEN 1 AND 1000),
    remaining   integer NOT NULL CHECK (remaining BETWEEN 0 AND times),
    probability double precision NOT NULL CHECK (probability > 0 AND probability <= 1),
    seed        bigint NOT NULL,
    delay_ms    integer NOT NULL DEFAULT 0 CHECK (delay_ms BETWEEN 0 AND 600000),
    status      integer NOT NULL DEFAULT 0 CHECK (status = 0 OR status BETWEEN 400 AND 599),
    copies      integer NOT NULL DEFAULT 0 CHECK (copies BETWEEN 0 AND 20),
    code        text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL
);

-- The webhook outbox: an event is written in the same transaction as the charge change it
-- announces, so an event exists if and only if the change committed.
CREATE TABLE gw_events (
    id         text PRIMARY KEY CHECK (id LIKE 'evt\_%'),
    type       text NOT NULL CHECK (type IN ('charge.pending', 'charge.succeeded', 'charge.failed', 'charge.refunded')),
    charge_id  text NOT NULL REFERENCES gw_charges (id),
    payload    text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX gw_events_charge ON gw_events (charge_id);

-- One delivery is one message to send (an event may have several: duplicates, resends).
CREATE TABLE gw_deliveries (
    id              bigserial PRIMARY KEY,
    event_id        text NOT NULL REFERENCES gw_events (id),
    reason          text NOT NULL CHECK (reason IN ('original', 'duplicate', 'resend')),
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz NOT NULL,
    delivered_at    timestamptz,
    last_error      text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL
);
CREATE INDEX gw_deliveries_due ON gw_deliveries (status, next_attempt_at, id);
CREATE INDEX gw_deliveries_event ON gw_deliveries (event_id);

-- Every attempt, successful or not, with what the receiver answered and how long it took.
CREATE TABLE gw_delivery_attempts (
    id          bigserial PRIMARY KEY,
    delivery_id bigint NOT NULL REFERENCES gw_deliveries (id),
    attempt     integer NOT NULL CHECK (attempt >= 1),
    status_code integer NOT NULL DEFAULT 0,
    latency_ms  bigint NOT NULL DEFAULT 0 CHECK (latency_ms >= 0),
    error       text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    UNIQUE (delivery_id, attempt)
);

-- +goose Down
DROP TABLE gw_delivery_attempts;
DROP TABLE gw_deliveries;
DROP TABLE gw_events;
DROP TABLE gw_faults;
DROP TABLE gw_fault_strikes;
DROP TABLE gw_idempotency_keys;
DROP TABLE gw_charges;
DROP TABLE gw_payment_methods;
