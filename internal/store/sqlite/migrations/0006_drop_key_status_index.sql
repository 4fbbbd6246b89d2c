-- 0006: requests_key_status is covered by requests_binding, which starts
-- with key_id; every change of a request's status had to update both.

DROP INDEX requests_key_status;
