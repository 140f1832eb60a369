-- At most one LIVE payment per order: pending or succeeded. The earlier index allowed one
-- pending payment; on PostgreSQL a second payment could slip in at the moment the first one
-- moved from pending to succeeded (its insert waited for that commit, then found no pending
-- row) and be charged as well. Counting succeeded payments as live closes that gap: a new
-- payment conflicts with a paid order's payment too, and is refused as order_already_paid.

-- +goose Up
DROP INDEX payments_one_pending_per_order;
CREATE UNIQUE INDEX payments_one_live_per_order ON payments (order_id) WHERE status IN ('pending', 'succeeded');

-- +goose Down
DROP INDEX payments_one_live_per_order;
CREATE UNIQUE INDEX payments_one_pending_per_order ON payments (order_id) WHERE status = 'pending';
