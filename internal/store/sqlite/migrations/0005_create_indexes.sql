-- 0005: indexes for creating a request when many are live. The duplicate
-- check and the pending limit read only the rows they need, instead of
-- every live request of the database or every pending one of the account.

CREATE INDEX requests_binding ON requests (key_id, args_hash, preview_hash, status, expires_at);
CREATE INDEX requests_account_status ON requests (account_id, status, expires_at);
