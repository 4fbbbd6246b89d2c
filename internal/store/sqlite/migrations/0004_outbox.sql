-- 0004: notification channels and the outbox of notifications to deliver.

CREATE TABLE notify_channels (
	id         TEXT PRIMARY KEY,
	account_id TEXT NOT NULL REFERENCES accounts (id),
	name       TEXT NOT NULL,
	type       TEXT NOT NULL,
	config     TEXT NOT NULL,            -- JSON object, never a secret
	secret     BLOB NOT NULL DEFAULT x'', -- sealed under a server key
	created_at INTEGER NOT NULL,
	UNIQUE (account_id, name)
);

-- request_id has no foreign key: the outbox is about requests but is not
-- part of them, and an item is dropped with its channel, not its request.
CREATE TABLE outbox (
	id              TEXT PRIMARY KEY,
	account_id      TEXT NOT NULL REFERENCES accounts (id),
	channel_id      TEXT NOT NULL REFERENCES notify_channels (id),
	request_id      TEXT NOT NULL DEFAULT '',
	event           TEXT NOT NULL,
	payload         BLOB NOT NULL DEFAULT x'', -- sealed; dropped when done
	state           TEXT NOT NULL,             -- pending, sent, failed
	attempts        INTEGER NOT NULL DEFAULT 0,
	created_at      INTEGER NOT NULL,
	next_attempt_at INTEGER NOT NULL,
	last_attempt_at INTEGER NOT NULL DEFAULT 0,
	lease_until     INTEGER NOT NULL DEFAULT 0,
	claim           TEXT NOT NULL DEFAULT '',
	last_error      TEXT NOT NULL DEFAULT '',
	failed_at       INTEGER NOT NULL DEFAULT 0,
	done_at         INTEGER NOT NULL DEFAULT 0
);
-- The senders' poll reads only pending items, soonest first.
CREATE INDEX outbox_due ON outbox (next_attempt_at, id) WHERE state = 'pending';
CREATE INDEX outbox_channel ON outbox (channel_id, state);
CREATE INDEX outbox_done ON outbox (done_at) WHERE state <> 'pending';
