-- The journal is pruned by age: the reaper (payments/reaper.go) deletes events older than
-- JOURNAL_RETENTION, a batch at a time, oldest first. An index on at lets each batch find its
-- rows without reading the whole table.

-- +goose Up
CREATE INDEX journal_events_at ON journal_events (at);

-- +goose Down
DROP INDEX journal_events_at;
