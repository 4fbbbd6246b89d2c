-- 0014: the typed facts of a request that the rules of who may approve it
-- read (the passkey step-up, auto-approve windows), so that no rule reads
-- the risk reasons, which are written for humans: the MCP tier of a call
-- ('' for other kinds, and for an MCP request whose tier is unknown, which
-- every rule on tiers treats as the riskiest) and whether the action
-- touches a protected path.
ALTER TABLE requests ADD COLUMN tier TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN protected BOOLEAN NOT NULL DEFAULT false;

-- Requests stored before. A delete whose reasons named a protected path is
-- protected. The gateway wrote an MCP call's tier as a control character
-- ("tier: \u0001" for write, \u0002 for commit, \u0003 for external, JSON
-- escaped): the reasons get the tier's word, and commit and external calls
-- their tier, the highest one a request names. Any other MCP request keeps
-- an unknown tier: it needs what the riskiest tier needs.
UPDATE requests SET protected = true WHERE strpos(risk_reasons, '"protected path:') > 0;
UPDATE requests SET risk_reasons = replace(risk_reasons, '"tier: \u0001"', '"tier: write"')
	WHERE kind = 'mcp' AND strpos(risk_reasons, '"tier: \u0001"') > 0;
UPDATE requests SET risk_reasons = replace(risk_reasons, '"tier: \u0002"', '"tier: commit"')
	WHERE kind = 'mcp' AND strpos(risk_reasons, '"tier: \u0002"') > 0;
UPDATE requests SET risk_reasons = replace(risk_reasons, '"tier: \u0003"', '"tier: external"')
	WHERE kind = 'mcp' AND strpos(risk_reasons, '"tier: \u0003"') > 0;
UPDATE requests SET tier = 'commit' WHERE kind = 'mcp' AND strpos(risk_reasons, '"tier: commit"') > 0;
UPDATE requests SET tier = 'external' WHERE kind = 'mcp' AND strpos(risk_reasons, '"tier: external"') > 0;
