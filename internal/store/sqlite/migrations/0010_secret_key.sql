-- 0010: the check of the server's secret key. The key itself lives outside
-- the database (a key file); it wraps every row of server_keys and keys the
-- audit chain. This row proves which key that is (an HMAC only the same key
-- reproduces) and records from which entry on the audit chain carries MACs
-- instead of bare hashes: the entries before it were written before the
-- store was sealed. No row: the store was never sealed, and the first open
-- with a key seals it.
CREATE TABLE secret_key (
	id               INTEGER PRIMARY KEY CHECK (id = 1),
	audit_keyed_from INTEGER NOT NULL,
	mac              TEXT NOT NULL
);
