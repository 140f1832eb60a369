-- Stock comes back from orders that are never paid: ORDER_HOLD after its last unsuccessful
-- attempt an order becomes 'expired' (payments/expiry.go), its stock returned in the same
-- transaction, and it can no longer be paid. orders_unpaid_since lets the expiry job find the
-- candidates, oldest first, without reading paid orders.
--
-- The journal stops growing with every repeat: a key's replays, 409s and 422s are written as
-- rows up to a bound, and past it counted on the last such row (repeats, and last_at for
-- when the latest one happened), so no client can grow an order's journal without end.

-- +goose Up
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check
    CHECK (status IN ('pending_payment', 'payment_failed', 'paid', 'expired'));
CREATE INDEX orders_unpaid_since ON orders (updated_at) WHERE status IN ('pending_payment', 'payment_failed');

ALTER TABLE journal_events
    ADD COLUMN repeats integer NOT NULL DEFAULT 0 CHECK (repeats >= 0),
    ADD COLUMN last_at timestamptz;

-- +goose Down
ALTER TABLE journal_events DROP COLUMN last_at, DROP COLUMN repeats;
DROP INDEX orders_unpaid_since;
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check
    CHECK (status IN ('pending_payment', 'payment_failed', 'paid'));
