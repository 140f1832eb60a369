-- A request held by "Prefer: wait" in another shop process than the key's owner marks the key
-- awaited; only then does the owner announce the key's completion or release with pg_notify
-- (models/idempotency_notify.go). A NOTIFY takes a database-wide lock until its transaction
-- has committed, which would serialise every checkout's last commit if every key announced
-- itself; this way only the keys somebody waits for pay for it.

-- +goose Up
ALTER TABLE idempotency_keys ADD COLUMN awaited boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN awaited;
