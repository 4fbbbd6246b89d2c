-- 0008: the lists of the seed-compatible routes (GET /api/delete-requests,
-- /api/claude-events) read an account's seed requests of one kind, newest
-- first. Only seed requests are in this index, so such a list reads its
-- own rows and not the account's v1 and MCP requests, however many.

CREATE INDEX requests_account_seed ON requests (account_id, kind, created_at, id) WHERE seed_id <> '';
