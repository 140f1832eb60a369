-- The journal is pruned by age: the reaper (payments/reaper.go) deletes events older than
-- JOURNAL_RETENTION, a batch at a time, oldest first. An index on at lets each batch find its
-- rows without reading the whole table.
--
-- The index is built CONCURRENTLY so that a large journal stays writable meanwhile: phase
-- events are written inside checkout transactions, which a plain CREATE INDEX would block.
-- CONCURRENTLY cannot run in a transaction, hence NO TRANSACTION. If the build fails it leaves
-- an invalid index behind, and the migration then fails on "already exists" until someone drops
-- it: loud, rather than an index that silently does nothing.

-- +goose NO TRANSACTION

-- +goose Up
CREATE INDEX CONCURRENTLY journal_events_at ON journal_events (at);

-- +goose Down
DROP INDEX CONCURRENTLY journal_events_at;
