-- Rate-limit counters shared by the api replicas (internal/ratelimit): how many events one
-- key (an API key or user, a client address, a postback token's program) had in one fixed
-- window of one limit (scope). Each replica adds its own counts in batches and reads the
-- total back, so a budget is the same on one replica or many.
--
-- UNLOGGED: the counters are rewritten several times a second and worth nothing after their
-- window, so they skip the write-ahead log. The price is that a Postgres crash or a failover
-- to a standby empties the table, which gives every key a fresh window once; a restart of
-- the api does not.
CREATE UNLOGGED TABLE rate_limit_counters (
    scope        text        NOT NULL,
    key          text        NOT NULL,
    window_start timestamptz NOT NULL,
    -- window_start plus the limit's window: the api deletes rows past it (Prune).
    expires_at   timestamptz NOT NULL,
    count        bigint      NOT NULL CHECK (count >= 0),
    PRIMARY KEY (scope, key, window_start)
);
CREATE INDEX rate_limit_counters_expires_at ON rate_limit_counters (expires_at);
