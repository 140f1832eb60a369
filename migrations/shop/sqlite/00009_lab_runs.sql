-- The failure lab's runs, kept so that a result has a permalink that survives a restart of
-- the shop (/lab/runs/{id}). A run is written when it starts (status running) and again when
-- it ends, with its whole result as JSON: verdict, invariants, timeline, and the snapshots of
-- the lab stack's gateway ledger, webhook deliveries and reconciliation report. The lab stack
-- itself is thrown away after the run; this row is what is left of it.

-- +goose Up
CREATE TABLE lab_runs (
    id          text PRIMARY KEY,
    scenario    text NOT NULL,
    mode        text NOT NULL CHECK (mode IN ('protected', 'unprotected')),
    status      text NOT NULL CHECK (status IN ('running', 'done')),
    outcome     text NOT NULL DEFAULT '',
    ok          boolean NOT NULL DEFAULT false,
    result      text NOT NULL DEFAULT '',
    created_at  datetime NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    finished_at datetime
);
CREATE INDEX lab_runs_created ON lab_runs (created_at);
CREATE INDEX lab_runs_scenario ON lab_runs (scenario, mode, created_at);

-- +goose Down
DROP TABLE lab_runs;
