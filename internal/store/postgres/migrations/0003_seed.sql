-- 0003: the seed-compatible routes: client-chosen ids, one-time links and
-- the sealed secret of the key their HMAC is made with.

ALTER TABLE requests ADD COLUMN seed_id TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX requests_seed_id ON requests (seed_id) WHERE seed_id <> '';

CREATE TABLE links (
	hash       TEXT COLLATE "C" PRIMARY KEY,
	request_id TEXT COLLATE "C" NOT NULL REFERENCES requests (id),
	action     TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE INDEX links_request ON links (request_id);

ALTER TABLE agent_keys ADD COLUMN seed_secret BYTEA NOT NULL DEFAULT '\x';
