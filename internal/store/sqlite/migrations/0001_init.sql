-- 0001: the first schema. Times are INTEGER unix nanoseconds, 0 for none.

CREATE TABLE accounts (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL UNIQUE,
	created_at INTEGER NOT NULL
);

CREATE TABLE agent_keys (
	id         TEXT PRIMARY KEY,
	account_id TEXT NOT NULL REFERENCES accounts (id),
	name       TEXT NOT NULL,
	hash       TEXT NOT NULL,
	hint       TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	revoked_at INTEGER NOT NULL DEFAULT 0,
	UNIQUE (account_id, name)
);
CREATE INDEX agent_keys_hash ON agent_keys (hash);

CREATE TABLE approvers (
	id            TEXT PRIMARY KEY,
	username      TEXT NOT NULL UNIQUE,
	password_hash TEXT NOT NULL,
	created_at    INTEGER NOT NULL
);

CREATE TABLE memberships (
	approver_id TEXT NOT NULL REFERENCES approvers (id),
	account_id  TEXT NOT NULL REFERENCES accounts (id),
	created_at  INTEGER NOT NULL,
	PRIMARY KEY (approver_id, account_id)
);

CREATE TABLE approver_tokens (
	id          TEXT PRIMARY KEY,
	approver_id TEXT NOT NULL REFERENCES approvers (id),
	account_id  TEXT NOT NULL REFERENCES accounts (id),
	name        TEXT NOT NULL,
	hash        TEXT NOT NULL,
	hint        TEXT NOT NULL,
	created_at  INTEGER NOT NULL,
	revoked_at  INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX approver_tokens_hash ON approver_tokens (hash);

CREATE TABLE requests (
	id                 TEXT PRIMARY KEY,
	account_id         TEXT NOT NULL REFERENCES accounts (id),
	key_id             TEXT NOT NULL REFERENCES agent_keys (id),
	key_name           TEXT NOT NULL,
	reference          TEXT NOT NULL,
	kind               TEXT NOT NULL,
	action             TEXT NOT NULL,
	arguments          TEXT NOT NULL, -- RFC 8785 canonical JSON, '' for none
	args_hash          TEXT NOT NULL,
	preview            TEXT NOT NULL,
	preview_hash       TEXT NOT NULL,
	risk_reasons       TEXT NOT NULL, -- JSON array
	context            TEXT NOT NULL, -- JSON object
	status             TEXT NOT NULL,
	created_at         INTEGER NOT NULL,
	expires_at         INTEGER NOT NULL,
	decided_at         INTEGER NOT NULL DEFAULT 0,
	decided_by         TEXT NOT NULL DEFAULT '',
	reason             TEXT NOT NULL DEFAULT '',
	auto_approve_until INTEGER NOT NULL DEFAULT 0,
	consumed_at        INTEGER NOT NULL DEFAULT 0,
	seed               TEXT NOT NULL DEFAULT '' -- JSON, '' for none
);
CREATE INDEX requests_account_created ON requests (account_id, created_at);
CREATE INDEX requests_key_status ON requests (key_id, status);
CREATE INDEX requests_status_expires ON requests (status, expires_at);
-- A reference code names one live request of an account; a finished request
-- gives its code back.
CREATE UNIQUE INDEX requests_live_reference ON requests (account_id, reference)
	WHERE status IN ('pending', 'approved');

CREATE TABLE auto_approve_windows (
	id         TEXT PRIMARY KEY,
	account_id TEXT NOT NULL REFERENCES accounts (id),
	key_id     TEXT NOT NULL REFERENCES agent_keys (id),
	session_id TEXT NOT NULL,
	kind       TEXT NOT NULL,
	action     TEXT NOT NULL,
	until      INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	request_id TEXT NOT NULL REFERENCES requests (id)
);
CREATE INDEX auto_approve_windows_scope ON auto_approve_windows (key_id, session_id, kind, action, until);

-- The audit log has no foreign keys: it outlives what it talks about.
CREATE TABLE audit_log (
	seq        INTEGER PRIMARY KEY,
	at         INTEGER NOT NULL,
	account_id TEXT NOT NULL,
	request_id TEXT NOT NULL,
	event      TEXT NOT NULL,
	actor      TEXT NOT NULL,
	detail     TEXT NOT NULL,
	prev_hash  TEXT NOT NULL,
	hash       TEXT NOT NULL
);

-- audit_head records the newest entry beside the log, so that removing the
-- last rows of the log is detectable.
CREATE TABLE audit_head (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	seq  INTEGER NOT NULL,
	hash TEXT NOT NULL
);
INSERT INTO audit_head (id, seq, hash) VALUES (1, 0, '');
