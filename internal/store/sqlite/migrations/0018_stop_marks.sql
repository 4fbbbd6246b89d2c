-- 0018: a stop of an agent session marks what it ended, so that a request
-- a window or a hook approval let through while the stop was made is
-- refused as it is stored, whichever of the two read its clock first:
-- every window of the session, open or closed, and every claim on the
-- session's used hook approvals get the time of the stop (0: never
-- stopped). A covered delete finds its claim by its own id.

ALTER TABLE auto_approve_windows ADD COLUMN stopped_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE coverages ADD COLUMN stopped_at INTEGER NOT NULL DEFAULT 0;
CREATE INDEX coverages_request ON coverages (request_id);
