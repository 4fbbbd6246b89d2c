-- 0024: every statement that changes what authenticates a caller (agent
-- keys, approver tokens, approvers, memberships) announces it on the
-- change feed, whoever runs it (a replica, a command-line process, a
-- statement typed by hand), so that the replicas forget the credentials
-- they keep (credcache.go) as soon as it commits. A new row needs no
-- announcement: a lookup that found nothing is never kept.
CREATE FUNCTION countersign_credentials_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('countersign', '  - +credentials');
	RETURN NULL;
END
$$;
CREATE TRIGGER agent_keys_changed AFTER UPDATE OR DELETE OR TRUNCATE ON agent_keys
	FOR EACH STATEMENT EXECUTE FUNCTION countersign_credentials_changed();
CREATE TRIGGER approver_tokens_changed AFTER UPDATE OR DELETE OR TRUNCATE ON approver_tokens
	FOR EACH STATEMENT EXECUTE FUNCTION countersign_credentials_changed();
CREATE TRIGGER approvers_changed AFTER UPDATE OR DELETE OR TRUNCATE ON approvers
	FOR EACH STATEMENT EXECUTE FUNCTION countersign_credentials_changed();
CREATE TRIGGER memberships_changed AFTER UPDATE OR DELETE OR TRUNCATE ON memberships
	FOR EACH STATEMENT EXECUTE FUNCTION countersign_credentials_changed();
