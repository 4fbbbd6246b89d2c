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

-- A change asked for with an Idempotency-Key, recorded in the change's own
-- transaction: a retry with the key gets the first answer. Kept a day.
CREATE TABLE idempotency (
	principal          TEXT COLLATE "C" NOT NULL,
	key                TEXT COLLATE "C" NOT NULL,
	op                 TEXT NOT NULL,
	fingerprint        TEXT NOT NULL,
	request_id         TEXT COLLATE "C" NOT NULL,
	created            BOOLEAN NOT NULL,
	status             TEXT NOT NULL,
	expires_at         BIGINT NOT NULL,
	decided_at         BIGINT NOT NULL,
	decided_by         TEXT NOT NULL,
	reason             TEXT NOT NULL,
	auto_approve_until BIGINT NOT NULL,
	consumed_at        BIGINT NOT NULL,
	created_at         BIGINT NOT NULL,
	PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_created ON idempotency (created_at);
