-- Chaos runs of the failure lab (`shop lab chaos`, /lab/chaos): what was asked, how it went,
-- and the judged result as the JSON `shop lab chaos --json` prints. A run is written when it
-- starts (status running) and once more when it ends, so it survives a restart of the shop; a
-- run still marked running that no shop is making was cut off by a restart.

-- +goose Up
CREATE TABLE chaos_runs (
    id             text PRIMARY KEY,
    seed           integer NOT NULL,
    purchases      integer NOT NULL CHECK (purchases > 0),
    clients        integer NOT NULL CHECK (clients > 0),
    replicas       integer NOT NULL CHECK (replicas > 0),
    protection_off text NOT NULL DEFAULT '',
    status         text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done', 'failed')),
    ok             integer NOT NULL DEFAULT 0 CHECK (ok IN (0, 1)),
    verdict        text NOT NULL DEFAULT '',
    result         text NOT NULL DEFAULT '',
    error          text NOT NULL DEFAULT '',
    created_at     datetime NOT NULL DEFAULT CURRENT_TIMESTAMP,
    finished_at    datetime
);
CREATE INDEX chaos_runs_created ON chaos_runs (created_at);

-- +goose Down
DROP TABLE chaos_runs;
