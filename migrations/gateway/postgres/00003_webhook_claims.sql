-- Several webhook senders: each delivery has a lane, and a sender claims a due delivery for a
-- while before it sends it.
--
-- lane is fixed by the charge (a hash of its id), so every delivery of one charge is sent by
-- the same sender, one after the other, in the order they fall due; different charges go out
-- in parallel. claimed_by / claimed_until is the claim: a sender (one per gateway process
-- and sender) sets both in the UPDATE that takes the delivery, and clears them when it
-- records the attempt. A claim whose claimed_until has passed belongs to a process that died:
-- any sender may take the delivery again.

-- +goose Up
ALTER TABLE gw_deliveries ADD COLUMN lane integer NOT NULL DEFAULT 0 CHECK (lane >= 0);
ALTER TABLE gw_deliveries ADD COLUMN claimed_by text NOT NULL DEFAULT '';
ALTER TABLE gw_deliveries ADD COLUMN claimed_until timestamptz;

-- +goose Down
ALTER TABLE gw_deliveries DROP COLUMN claimed_until;
ALTER TABLE gw_deliveries DROP COLUMN claimed_by;
ALTER TABLE gw_deliveries DROP COLUMN lane;
