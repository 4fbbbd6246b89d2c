-- 0001: the first schema, as in the SQLite store. Times are BIGINT unix
-- nanoseconds, 0 for none, so that the audit hash of an entry is the same
-- on both backends. Ids and names that lists are ordered by compare
-- bytewise (COLLATE "C"), as SQLite compares them.

CREATE TABLE accounts (
	id         TEXT COLLATE "C" PRIMARY KEY,
	name       TEXT COLLATE "C" NOT NULL UNIQUE,
	created_at BIGINT NOT NULL
);

CREATE TABLE agent_keys (
	id         TEXT COLLATE "C" PRIMARY KEY,
	account_id TEXT COLLATE "C" NOT NULL REFERENCES accounts (id),
	name       TEXT COLLATE "C" NOT NULL,
	hash       TEXT NOT NULL,
	hint       TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	revoked_at BIGINT NOT NULL DEFAULT 0,
	UNIQUE (account_id, name)
);
CREATE INDEX agent_keys_hash ON agent_keys (hash);

CREATE TABLE approvers (
	id            TEXT COLLATE "C" PRIMARY KEY,
	username      TEXT COLLATE "C" NOT NULL UNIQUE,
	password_hash TEXT NOT NULL,
	created_at    BIGINT NOT NULL
);

CREATE TABLE memberships (
	approver_id TEXT COLLATE "C" NOT NULL REFERENCES approvers (id),
	account_id  TEXT COLLATE "C" NOT NULL REFERENCES accounts (id),
	created_at  BIGINT NOT NULL,
	PRIMARY KEY (approver_id, account_id)
);

CREATE TABLE approver_tokens (
	id          TEXT COLLATE "C" PRIMARY KEY,
	approver_id TEXT COLLATE "C" NOT NULL REFERENCES approvers (id),
	account_id  TEXT COLLATE "C" NOT NULL REFERENCES accounts (id),
	name        TEXT NOT NULL,
	hash        TEXT NOT NULL,
	hint        TEXT NOT NULL,
	created_at  BIGINT NOT NULL,
	revoked_at  BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX approver_tokens_hash ON approver_tokens (hash);

CREATE TABLE requests (
	id                 TEXT COLLATE "C" PRIMARY KEY,
	account_id         TEXT COLLATE "C" NOT NULL REFERENCES accounts (id),
	key_id             TEXT COLLATE "C" NOT NULL REFERENCES agent_keys (id),
	key_name           TEXT NOT NULL,
	reference          TEXT COLLATE "C" NOT NULL,
	kind               TEXT NOT NULL,
	action             TEXT NOT NULL,
	arguments          TEXT NOT NULL, -- RFC 8785 canonical JSON, '' for none
	args_hash          TEXT NOT NULL,
	preview            TEXT NOT NULL,
	preview_hash       TEXT NOT NULL,
	risk_reasons       TEXT NOT NULL, -- JSON array
	context            TEXT NOT NULL, -- JSON object
	-- session_id repeats context's session_id, so that a list by session
	-- reads a column rather than parsing every row's JSON.
	session_id         TEXT NOT NULL DEFAULT '',
	status             TEXT NOT NULL,
	created_at         BIGINT NOT NULL,
	expires_at         BIGINT NOT NULL,
	decided_at         BIGINT NOT NULL DEFAULT 0,
	decided_by         TEXT NOT NULL DEFAULT '',
	reason             TEXT NOT NULL DEFAULT '',
	auto_approve_until BIGINT NOT NULL DEFAULT 0,
	consumed_at        BIGINT NOT NULL DEFAULT 0,
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
	id         TEXT COLLATE "C" PRIMARY KEY,
	account_id TEXT COLLATE "C" NOT NULL REFERENCES accounts (id),
	key_id     TEXT COLLATE "C" NOT NULL REFERENCES agent_keys (id),
	session_id TEXT NOT NULL,
	kind       TEXT NOT NULL,
	action     TEXT NOT NULL,
	until      BIGINT NOT NULL,
	created_at BIGINT NOT NULL,
	request_id TEXT COLLATE "C" NOT NULL REFERENCES requests (id)
);
CREATE INDEX auto_approve_windows_scope ON auto_approve_windows (key_id, session_id, kind, action, until);

-- The audit log has no foreign keys: it outlives what it talks about.
CREATE TABLE audit_log (
	seq        BIGINT PRIMARY KEY,
	at         BIGINT NOT NULL,
	account_id TEXT NOT NULL,
	request_id TEXT NOT NULL,
	event      TEXT NOT NULL,
	actor      TEXT NOT NULL,
	detail     TEXT NOT NULL,
	prev_hash  TEXT NOT NULL,
	hash       TEXT NOT NULL
);

-- audit_head records the newest entry beside the log, so that removing the
-- last rows of the log is detectable. Its one row is also the lock that
-- orders appends to the chain (SELECT … FOR UPDATE).
CREATE TABLE audit_head (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	seq  BIGINT NOT NULL,
	hash TEXT NOT NULL
);
INSERT INTO audit_head (id, seq, hash) VALUES (1, 0, '');
