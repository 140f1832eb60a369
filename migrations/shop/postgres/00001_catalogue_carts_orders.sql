-- The shop's first schema: tenants, their catalogues, browser carts, orders and payments.
-- Money is always an integer amount in minor units plus an ISO 4217 currency code.

-- +goose Up
CREATE TABLE tenants (
    id           text PRIMARY KEY CHECK (id ~ '^[a-z0-9-]{2,32}$'),
    name         text NOT NULL,
    -- SHA-256 of the API key, hex: a leaked database does not leak working credentials.
    api_key_hash text NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE products (
    id          bigserial PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants (id),
    sku         text NOT NULL CHECK (length(sku) BETWEEN 1 AND 64),
    name        text NOT NULL,
    description text NOT NULL DEFAULT '',
    image       text NOT NULL DEFAULT '',
    amount      bigint NOT NULL CHECK (amount > 0),
    currency    text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    -- Stock never goes negative: the conditional decrement in the order store relies on it.
    stock       integer NOT NULL CHECK (stock >= 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, sku)
);

-- A cart belongs to one browser session in one tenant's storefront. Once an order is placed
-- from it, it is "converted" and never changes again; the session gets a fresh cart.
CREATE TABLE carts (
    id         text PRIMARY KEY,
    tenant_id  text NOT NULL REFERENCES tenants (id),
    session_id text NOT NULL,
    status     text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'converted')),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
-- At most one open cart per session and tenant.
CREATE UNIQUE INDEX carts_one_open_per_session ON carts (tenant_id, session_id) WHERE status = 'open';

CREATE TABLE cart_lines (
    cart_id    text NOT NULL REFERENCES carts (id) ON DELETE CASCADE,
    product_id bigint NOT NULL REFERENCES products (id),
    quantity   integer NOT NULL CHECK (quantity BETWEEN 1 AND 99),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cart_id, product_id)
);

CREATE TABLE orders (
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
    shipping_country     text NOT NULL CHECK (shipping_country ~ '^[A-Z]{2}$'),
    shipping_method      text NOT NULL DEFAULT 'standard' CHECK (shipping_method IN ('standard', 'express')),
    subtotal_amount      bigint NOT NULL CHECK (subtotal_amount > 0),
    shipping_amount      bigint NOT NULL DEFAULT 0 CHECK (shipping_amount >= 0),
    amount               bigint NOT NULL CHECK (amount = subtotal_amount + shipping_amount),
    currency             text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    status               text NOT NULL DEFAULT 'pending_payment'
                         CHECK (status IN ('pending_payment', 'payment_failed', 'paid')),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX orders_tenant_session ON orders (tenant_id, session_id, created_at);

-- Order lines snapshot name and price: a later price change does not rewrite history.
CREATE TABLE order_lines (
    order_id    text NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
    line_no     integer NOT NULL CHECK (line_no > 0),
    product_id  bigint NOT NULL REFERENCES products (id),
    sku         text NOT NULL,
    name        text NOT NULL,
    unit_amount bigint NOT NULL CHECK (unit_amount > 0),
    quantity    integer NOT NULL CHECK (quantity BETWEEN 1 AND 99),
    amount      bigint NOT NULL CHECK (amount = unit_amount * quantity),
    PRIMARY KEY (order_id, line_no)
);

-- A payment is one attempt to pay an order with one payment method. The shop never stores a
-- card number: only the gateway's payment method id and the last four digits.
CREATE TABLE payments (
    id                text PRIMARY KEY,
    tenant_id         text NOT NULL REFERENCES tenants (id),
    order_id          text NOT NULL REFERENCES orders (id),
    status            text NOT NULL DEFAULT 'pending'
                      CHECK (status IN ('pending', 'succeeded', 'failed', 'refunded')),
    amount            bigint NOT NULL CHECK (amount > 0),
    currency          text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    payment_method_id text NOT NULL,
    card_last4        text NOT NULL CHECK (length(card_last4) = 4),
    card_brand        text NOT NULL DEFAULT '',
    -- The idempotency key we send to the gateway, derived from this row: the same on every
    -- attempt and after a restart.
    gateway_key       text NOT NULL UNIQUE,
    gateway_charge_id text UNIQUE,
    decline_code      text NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX payments_order ON payments (order_id);
-- The last line of defence against a double charge being recorded as two paid payments.
CREATE UNIQUE INDEX payments_one_success_per_order ON payments (order_id) WHERE status = 'succeeded';

-- +goose Down
DROP TABLE payments;
DROP TABLE order_lines;
DROP TABLE orders;
DROP TABLE cart_lines;
DROP TABLE carts;
DROP TABLE products;
DROP TABLE tenants;
