-- Stock comes back from orders that are never paid: ORDER_HOLD after its last unsuccessful
-- attempt an order becomes 'expired' (payments/expiry.go), its stock returned in the same
-- transaction, and it can no longer be paid. orders_unpaid_since lets the expiry job find the
-- candidates, oldest first, without reading paid orders.
--
-- The journal stops growing with every repeat: a key's replays, 409s and 422s are written as
-- rows up to a bound, and past it counted on the last such row (repeats, and last_at for
-- when the latest one happened), so no client can grow an order's journal without end.
--
-- SQLite cannot change a CHECK constraint in place, so orders is rebuilt the way SQLite's
-- documentation prescribes (https://www.sqlite.org/lang_altertable.html#otheralter): a new
-- table, the rows copied, the old one dropped, the new one renamed, its index made again.
-- Foreign keys must be off meanwhile — dropping orders with them on would delete every order
-- line (ON DELETE CASCADE) — and that pragma has no effect inside a transaction, hence NO
-- TRANSACTION and an explicit one around the rebuild. The shop's pool has one connection, so
-- the pragmas and the transaction run on the same one.

-- +goose NO TRANSACTION

-- +goose Up
PRAGMA foreign_keys = OFF;

-- +goose StatementBegin
BEGIN IMMEDIATE;
CREATE TABLE orders_new (
    id                   text PRIMARY KEY,
    tenant_id            text NOT NULL REFERENCES tenants (id),
    -- A cart converts into at most one order, whatever happens to idempotency keys.
    cart_id              text UNIQUE REFERENCES carts (id),
    session_id           text,
    email                text NOT NULL,
    shipping_name        text NOT NULL,
    shipping_address     text NOT NULL,
    shipping_city        text NOT NULL,
    shipping_postal_code text NOT NULL,
    shipping_country     text NOT NULL CHECK (length(shipping_country) = 2 AND shipping_country NOT GLOB '*[^A-Z]*'),
    shipping_method      text NOT NULL DEFAULT 'standard' CHECK (shipping_method IN ('standard', 'express')),
    subtotal_amount      integer NOT NULL CHECK (subtotal_amount > 0),
    shipping_amount      integer NOT NULL DEFAULT 0 CHECK (shipping_amount >= 0),
    amount               integer NOT NULL CHECK (amount = subtotal_amount + shipping_amount),
    currency             text NOT NULL CHECK (length(currency) = 3 AND currency NOT GLOB '*[^A-Z]*'),
    status               text NOT NULL DEFAULT 'pending_payment'
                         CHECK (status IN ('pending_payment', 'payment_failed', 'paid', 'expired')),
    created_at           datetime NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at           datetime NOT NULL DEFAULT CURRENT_TIMESTAMP
);
INSERT INTO orders_new (id, tenant_id, cart_id, session_id, email, shipping_name, shipping_address,
    shipping_city, shipping_postal_code, shipping_country, shipping_method, subtotal_amount,
    shipping_amount, amount, currency, status, created_at, updated_at)
SELECT id, tenant_id, cart_id, session_id, email, shipping_name, shipping_address,
    shipping_city, shipping_postal_code, shipping_country, shipping_method, subtotal_amount,
    shipping_amount, amount, currency, status, created_at, updated_at
FROM orders;
DROP TABLE orders;
ALTER TABLE orders_new RENAME TO orders;
CREATE INDEX orders_tenant_session ON orders (tenant_id, session_id, created_at);
CREATE INDEX orders_unpaid_since ON orders (updated_at) WHERE status IN ('pending_payment', 'payment_failed');

ALTER TABLE journal_events ADD COLUMN repeats integer NOT NULL DEFAULT 0 CHECK (repeats >= 0);
ALTER TABLE journal_events ADD COLUMN last_at datetime;
COMMIT;
-- +goose StatementEnd

PRAGMA foreign_keys = ON;

-- +goose Down
PRAGMA foreign_keys = OFF;

-- +goose StatementBegin
BEGIN IMMEDIATE;
ALTER TABLE journal_events DROP COLUMN last_at;
ALTER TABLE journal_events DROP COLUMN repeats;
CREATE TABLE orders_old (
    id                   text PRIMARY KEY,
    tenant_id            text NOT NULL REFERENCES tenants (id),
    cart_id              text UNIQUE REFERENCES carts (id),
    session_id           text,
    email                text NOT NULL,
    shipping_name        text NOT NULL,
    shipping_address     text NOT NULL,
    shipping_city        text NOT NULL,
    shipping_postal_code text NOT NULL,
    shipping_country     text NOT NULL CHECK (length(shipping_country) = 2 AND shipping_country NOT GLOB '*[^A-Z]*'),
    shipping_method      text NOT NULL DEFAULT 'standard' CHECK (shipping_method IN ('standard', 'express')),
    subtotal_amount      integer NOT NULL CHECK (subtotal_amount > 0),
    shipping_amount      integer NOT NULL DEFAULT 0 CHECK (shipping_amount >= 0),
    amount               integer NOT NULL CHECK (amount = subtotal_amount + shipping_amount),
    currency             text NOT NULL CHECK (length(currency) = 3 AND currency NOT GLOB '*[^A-Z]*'),
    status               text NOT NULL DEFAULT 'pending_payment'
                         CHECK (status IN ('pending_payment', 'payment_failed', 'paid')),
    created_at           datetime NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at           datetime NOT NULL DEFAULT CURRENT_TIMESTAMP
);
INSERT INTO orders_old (id, tenant_id, cart_id, session_id, email, shipping_name, shipping_address,
    shipping_city, shipping_postal_code, shipping_country, shipping_method, subtotal_amount,
    shipping_amount, amount, currency, status, created_at, updated_at)
SELECT id, tenant_id, cart_id, session_id, email, shipping_name, shipping_address,
    shipping_city, shipping_postal_code, shipping_country, shipping_method, subtotal_amount,
    shipping_amount, amount, currency, status, created_at, updated_at
FROM orders;
DROP TABLE orders;
ALTER TABLE orders_old RENAME TO orders;
CREATE INDEX orders_tenant_session ON orders (tenant_id, session_id, created_at);
COMMIT;
-- +goose StatementEnd

PRAGMA foreign_keys = ON;
