-- 0025: the fingerprint of the teams configuration the server decides
-- under (approval.Teams.Fingerprint; "none" without one), recorded at
-- every start, so that a restart with another teams file is seen and
-- logged. One row at most.
CREATE TABLE teams_config (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	fingerprint TEXT NOT NULL,
	set_at INTEGER NOT NULL
);
