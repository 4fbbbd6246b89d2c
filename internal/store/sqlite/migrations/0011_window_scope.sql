-- 0011: an auto-approve window covers the shape of what the human approved,
-- not the whole tool. A request keeps the shape of its action (the commands
-- of a Bash line, the paths it deletes, the classes of its risk reasons) as
-- JSON, '' for none; the window keeps the shape of the approval that opened
-- it. coverages records which delete of the rm wrapper an approval of the
-- Claude Code hook covered: one at most, so the primary key is the
-- approval.

ALTER TABLE requests ADD COLUMN scope TEXT NOT NULL DEFAULT '';
ALTER TABLE auto_approve_windows ADD COLUMN scope TEXT NOT NULL DEFAULT '';
CREATE TABLE coverages (
	approval_id TEXT PRIMARY KEY REFERENCES requests (id),
	request_id  TEXT NOT NULL,
	created_at  INTEGER NOT NULL
);
