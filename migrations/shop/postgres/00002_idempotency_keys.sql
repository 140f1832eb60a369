-- Idempotency keys: one row per (tenant, client-chosen key). See docs/idempotency.md.
--
-- A row is reserved in state in_progress by one atomic INSERT … ON CONFLICT DO NOTHING and
-- holds a lease (lock_token + locked_at) while its owner works. It becomes completed, with the
-- response stored, in the same transaction as the business write. Times are computed by the
-- application and passed as parameters, so both dialects see the same clock.

-- +goose Up
CREATE TABLE idempotency_keys (
    id               text PRIMARY KEY,
    tenant_id        text NOT NULL REFERENCES tenants (id),
    key              text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    -- Who made the key within the tenant ("api_key:<hash prefix>" or "session:<id>") and for
    -- which endpoint ("POST /api/v1/orders"): another principal or endpoint gets 422.
    principal        text NOT NULL,
    endpoint         text NOT NULL,
    -- SHA-256 (hex) of the canonical significant parameters: other parameters get 422.
    fingerprint      text NOT NULL CHECK (length(fingerprint) = 64),
    state            text NOT NULL DEFAULT 'in_progress' CHECK (state IN ('in_progress', 'completed')),
    -- How far a multi-step operation got ('started', then e.g. 'order_created', 'finished').
    recovery_point   text NOT NULL DEFAULT 'started',
    -- The lease: NULL lock_token means nobody holds the key (a released key, free to resume).
    lock_token       text,
    locked_at        timestamptz,
    -- The canonical significant request as JSON text (never a card number), so a background
    -- completer can finish the operation without the client. Text, not jsonb: jsonb would
    -- reorder the canonical form.
    request_params   text NOT NULL DEFAULT '{}',
    -- The stored answer: status, allowlisted headers as a JSON object, and the body bytes.
    response_status  integer CHECK (response_status BETWEEN 100 AND 599),
    response_headers text,
    response_body    bytea,
    attempts         integer NOT NULL DEFAULT 1 CHECK (attempts > 0),
    -- Filled by the operations that create them, for reconciliation.
    order_id         text REFERENCES orders (id),
    payment_id       text REFERENCES payments (id),
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    completed_at     timestamptz,
    UNIQUE (tenant_id, key),
    -- A completed key has its answer and nobody's lock; an in-progress one has no answer yet.
    CHECK ((state = 'completed') = (response_status IS NOT NULL AND completed_at IS NOT NULL)),
    CHECK (state = 'in_progress' OR lock_token IS NULL)
);
-- The reaper walks completed keys by age; the reconciliation report lists stale in-progress ones.
CREATE INDEX idempotency_keys_completed ON idempotency_keys (completed_at) WHERE state = 'completed';
CREATE INDEX idempotency_keys_in_progress ON idempotency_keys (updated_at) WHERE state = 'in_progress';

-- +goose Down
DROP TABLE idempotency_keys;
