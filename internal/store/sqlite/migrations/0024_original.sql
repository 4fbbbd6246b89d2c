-- 0024: the action as the agent asked for it, kept when an approver
-- edited it before approving: JSON of countersign.Original ('' when the
-- request was not edited). The request's own columns hold the edited
-- action.
ALTER TABLE requests ADD COLUMN original TEXT NOT NULL DEFAULT '';
