-- 0023: what a coding agent's hook reported it ran under an approval,
-- after the call (0 and '': no report), and the agent's id of the call a
-- request is for, which the report names: context.call_id repeated, so
-- that a report finds its request through an index.
ALTER TABLE requests ADD COLUMN ran_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE requests ADD COLUMN ran_action TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN ran_args_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN call_id TEXT NOT NULL DEFAULT '';
CREATE INDEX requests_call ON requests (key_id, call_id) WHERE call_id <> '';
