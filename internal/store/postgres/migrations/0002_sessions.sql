-- 0002: browser sessions of approvers and the server's own keys.

CREATE TABLE sessions (
	hash         TEXT COLLATE "C" PRIMARY KEY,
	approver_id  TEXT COLLATE "C" NOT NULL REFERENCES approvers (id),
	account_id   TEXT COLLATE "C" NOT NULL REFERENCES accounts (id),
	created_at   BIGINT NOT NULL,
	expires_at   BIGINT NOT NULL,
	last_seen_at BIGINT NOT NULL,
	user_agent   TEXT NOT NULL,
	client       TEXT NOT NULL
);
CREATE INDEX sessions_approver ON sessions (approver_id, created_at);

CREATE TABLE server_keys (
	name       TEXT COLLATE "C" PRIMARY KEY,
	key        BYTEA NOT NULL,
	created_at BIGINT NOT NULL
);
