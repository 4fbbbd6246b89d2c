-- 0003: the seed-compatible routes: client-chosen ids, one-time links and
-- the sealed secret of the key their HMAC is made with.

ALTER TABLE requests ADD COLUMN seed_id TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX requests_seed_id ON requests (seed_id) WHERE seed_id <> '';

CREATE TABLE links (
	hash       TEXT PRIMARY KEY,
	request_id TEXT NOT NULL REFERENCES requests (id),
	action     TEXT NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE INDEX links_request ON links (request_id);

ALTER TABLE agent_keys ADD COLUMN seed_secret BLOB NOT NULL DEFAULT x'';
