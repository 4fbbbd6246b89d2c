-- 0009: a request's arguments as pages show them, rendered once when the
-- request is created (indented and bounded in size), so that no page view
-- renders them again. Requests stored before keep '' and are rendered,
-- bounded, when shown.

ALTER TABLE requests ADD COLUMN arguments_text TEXT NOT NULL DEFAULT '';
