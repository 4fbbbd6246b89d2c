-- 0019: a request an Idempotency-Key's record refers to is kept while the
-- record lives, however short the retention: pruning looks its id up here.
CREATE INDEX idempotency_request ON idempotency (request_id);
