-- 0016: a registered OAuth client records the network it came from (the /48
-- of an IPv6 address, '' for IPv4), so that registration is limited per
-- network as well as per address: one site holds many /64s.

ALTER TABLE oauth_clients ADD COLUMN registered_net TEXT NOT NULL DEFAULT '';
CREATE INDEX oauth_clients_net ON oauth_clients (registered_net) WHERE registered_net <> '';
