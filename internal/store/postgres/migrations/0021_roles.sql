-- 0021: an approver's membership of an account has a role: viewer (sees
-- the inbox), approver (decides) or admin (decides and manages the
-- account). Every membership made before roles keeps all it could do.
ALTER TABLE memberships ADD COLUMN role TEXT NOT NULL DEFAULT 'admin' CHECK (role IN ('viewer', 'approver', 'admin'));
