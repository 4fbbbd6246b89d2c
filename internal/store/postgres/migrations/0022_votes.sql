-- 0022: a request that needs several approvers collects their votes, one
-- per approver, each bound to the request's binding hash; and an agent key
-- made by an approver through the account API records who made it, so
-- that a rule can keep that approver from voting on its requests.
CREATE TABLE votes (
    request_id   TEXT NOT NULL REFERENCES requests(id),
    approver_id  TEXT NOT NULL,
    username     TEXT NOT NULL,
    binding_hash TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    seq          BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (request_id, approver_id)
);
ALTER TABLE agent_keys ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
