-- 0013: OAuth clients, grants (ADR 0007) and their tokens; sessions that a
-- grant's consent signed in.

CREATE TABLE oauth_clients (
	id              TEXT COLLATE "C" PRIMARY KEY,
	secret_hash     TEXT NOT NULL,
	name            TEXT NOT NULL,
	redirect_uris   TEXT NOT NULL,
	auth_method     TEXT NOT NULL,
	registered_from TEXT NOT NULL,
	created_at      BIGINT NOT NULL,
	last_used_at    BIGINT NOT NULL
);
CREATE INDEX oauth_clients_from ON oauth_clients (registered_from);
CREATE INDEX oauth_clients_unused ON oauth_clients (last_used_at, created_at);

CREATE TABLE grants (
	id            TEXT COLLATE "C" PRIMARY KEY,
	account_id    TEXT COLLATE "C" NOT NULL REFERENCES accounts (id),
	key_id        TEXT COLLATE "C" NOT NULL UNIQUE REFERENCES agent_keys (id),
	client_id     TEXT NOT NULL,
	client_name   TEXT NOT NULL,
	approver_id   TEXT NOT NULL,
	approver_name TEXT NOT NULL,
	tiers         TEXT NOT NULL,
	created_at    BIGINT NOT NULL,
	last_used_at  BIGINT NOT NULL,
	revoked_at    BIGINT NOT NULL
);
CREATE INDEX grants_account ON grants (account_id, created_at);

CREATE TABLE oauth_tokens (
	hash         TEXT COLLATE "C" PRIMARY KEY,
	kind         TEXT NOT NULL,
	grant_id     TEXT COLLATE "C" NOT NULL REFERENCES grants (id),
	client_id    TEXT NOT NULL,
	resource     TEXT NOT NULL,
	redirect_uri TEXT NOT NULL,
	challenge    TEXT NOT NULL,
	created_at   BIGINT NOT NULL,
	expires_at   BIGINT NOT NULL,
	used_at      BIGINT NOT NULL
);
CREATE INDEX oauth_tokens_grant ON oauth_tokens (grant_id);

ALTER TABLE sessions ADD COLUMN grant_id TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_grant ON sessions (grant_id) WHERE grant_id <> '';
