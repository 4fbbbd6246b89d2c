-- 0017: the hot queries cost what they return, not what the account has
-- ever done, and old history can be pruned.

-- The approver's list of one status, newest first (the pending list above
-- all): a walk of that status's own entries, however many finished
-- requests the account holds.
CREATE INDEX requests_account_status_created ON requests (account_id, status, created_at, id);

-- A request by its reference code (a decision from the terminal): the
-- code's own entries, not the account's whole history.
CREATE INDEX requests_account_reference ON requests (account_id, reference, created_at, id);

-- Retention finds finished requests by age among those alone.
CREATE INDEX requests_done_created ON requests (created_at) WHERE status NOT IN ('pending', 'approved');

-- Pruning a request removes what refers to it, found by its id.
CREATE INDEX auto_approve_windows_request ON auto_approve_windows (request_id);
-- The outbox's request_id has the database's collation; the ids it is
-- matched with have "C".
CREATE INDEX outbox_request ON outbox (request_id COLLATE "C");
CREATE INDEX coverages_request ON coverages (request_id);
