-- 0002: browser sessions of approvers and the server's own keys.

CREATE TABLE sessions (
	hash         TEXT PRIMARY KEY,
	approver_id  TEXT NOT NULL REFERENCES approvers (id),
	account_id   TEXT NOT NULL REFERENCES accounts (id),
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	last_seen_at INTEGER NOT NULL,
	user_agent   TEXT NOT NULL,
	client       TEXT NOT NULL
);
CREATE INDEX sessions_approver ON sessions (approver_id, created_at);

CREATE TABLE server_keys (
	name       TEXT PRIMARY KEY,
	key        BLOB NOT NULL,
	created_at INTEGER NOT NULL
);
