-- The W3C trace context of the request that made an event (the charge, the refund), so that
-- every delivery of the event continues that request's trace: the shop's webhook handler and
-- the jobs it enqueues join the checkout's trace. '' when the request carried none.

-- +goose Up
ALTER TABLE gw_events ADD COLUMN traceparent text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE gw_events DROP COLUMN traceparent;
