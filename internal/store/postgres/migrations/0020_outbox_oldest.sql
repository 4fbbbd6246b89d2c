-- 0020: the oldest notification not delivered yet, which every scrape of
-- /metrics reports, is the first entry of this index: no walk of the
-- pending notifications, however many wait.
CREATE INDEX outbox_pending_created ON outbox (created_at) WHERE state = 'pending';
