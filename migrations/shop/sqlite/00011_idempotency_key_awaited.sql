-- The same column as on PostgreSQL, for one schema on both dialects. SQLite has no
-- notifications: a request waiting for another process's owner polls the key instead, and
-- nothing sets this column.

-- +goose Up
ALTER TABLE idempotency_keys ADD COLUMN awaited boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN awaited;
