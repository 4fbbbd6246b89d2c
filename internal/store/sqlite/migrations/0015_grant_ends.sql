-- 0015: a grant ends with its key and with the approver who allowed it.
-- Before this version revoking a grant's key left the grant's consent
-- sessions signed in, and removing an approver from an account (or
-- entirely) left its grants there live. Such grants are revoked now, as
-- RevokeGrant revokes one: with their key, their tokens and the sessions
-- their consent signed in. A grant whose key was revoked keeps that time.

UPDATE grants SET revoked_at = COALESCE(
		NULLIF((SELECT k.revoked_at FROM agent_keys k WHERE k.id = grants.key_id), 0),
		CAST(strftime('%s', 'now') AS INTEGER) * 1000000000)
	WHERE revoked_at = 0 AND (
		EXISTS (SELECT 1 FROM agent_keys k WHERE k.id = grants.key_id AND k.revoked_at <> 0)
		OR NOT EXISTS (SELECT 1 FROM memberships m WHERE m.approver_id = grants.approver_id AND m.account_id = grants.account_id));

UPDATE agent_keys SET revoked_at = (SELECT g.revoked_at FROM grants g WHERE g.key_id = agent_keys.id)
	WHERE revoked_at = 0 AND id IN (SELECT key_id FROM grants WHERE revoked_at <> 0);

DELETE FROM oauth_tokens WHERE grant_id IN (SELECT id FROM grants WHERE revoked_at <> 0);

DELETE FROM sessions WHERE grant_id IN (SELECT id FROM grants WHERE revoked_at <> 0);

-- Grants are revoked by approver when the approver leaves or is reset.
CREATE INDEX grants_approver ON grants (approver_id);
