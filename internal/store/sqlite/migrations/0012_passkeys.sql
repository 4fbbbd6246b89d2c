-- 0012: approvers' passkeys (WebAuthn credentials) and the ceremonies in
-- flight. A passkey holds only public data; a ceremony lives for minutes
-- and is used once. An approver without a password (passkey-only) has an
-- empty password_hash.

CREATE TABLE webauthn_credentials (
	id            TEXT PRIMARY KEY,
	approver_id   TEXT NOT NULL REFERENCES approvers (id),
	credential_id BLOB NOT NULL UNIQUE,
	public_key    BLOB NOT NULL,
	sign_count    INTEGER NOT NULL,
	aaguid        BLOB NOT NULL,
	transports    TEXT NOT NULL, -- JSON array
	flags         INTEGER NOT NULL,
	name          TEXT NOT NULL,
	created_at    INTEGER NOT NULL,
	last_used_at  INTEGER NOT NULL DEFAULT 0,
	UNIQUE (approver_id, name)
);

CREATE TABLE webauthn_ceremonies (
	hash        TEXT PRIMARY KEY,
	purpose     TEXT NOT NULL,
	approver_id TEXT NOT NULL,
	data        TEXT NOT NULL,
	expires_at  INTEGER NOT NULL
);
CREATE INDEX webauthn_ceremonies_expires ON webauthn_ceremonies (expires_at);
