-- 0026: the fingerprint of the teams configuration the replicas decide
-- under (approval.Teams.Fingerprint; "none" without one): every replica
-- writes its own at start, and decides only while the row holds it, so
-- that replicas started with different teams files never decide at once.
-- Every change of the row is announced on the change feed, whoever makes
-- it, so that the replicas, which keep the row while they listen, read it
-- again as soon as it commits.
CREATE TABLE teams_config (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	fingerprint TEXT NOT NULL,
	set_at BIGINT NOT NULL
);
CREATE FUNCTION countersign_teams_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('countersign', '  - +teams');
	RETURN NULL;
END
$$;
CREATE TRIGGER teams_config_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON teams_config
	FOR EACH STATEMENT EXECUTE FUNCTION countersign_teams_changed();
