-- 0007: the indexes that only the live requests need keep only those. A
-- finished request leaves them, so they stay small however many requests
-- the database keeps, and a change of status updates fewer of them:
-- consuming an approval only removes entries.
--
-- requests_live_expiry: the sweeper's pending or approved requests by expiry.
-- requests_live_binding: a key's pending twin, or the approval a retry takes.
-- requests_account_pending: the pending limit of an account.
-- Lists by status read requests_account_created, newest first.

DROP INDEX requests_status_expires;
DROP INDEX requests_binding;
DROP INDEX requests_account_status;
CREATE INDEX requests_live_expiry ON requests (expires_at) WHERE status IN ('pending', 'approved');
CREATE INDEX requests_live_binding ON requests (key_id, args_hash, preview_hash) WHERE status IN ('pending', 'approved');
CREATE INDEX requests_account_pending ON requests (account_id, expires_at) WHERE status = 'pending';
