-- Deliveries of webhooks and postbacks (internal/delivery). The deliver component records one
-- row per (event, target) before it commits the event's Kafka offset, so an event consumed
-- twice never makes two deliveries. Retries are rows with a due time, not timers in memory:
-- a worker restart loses nothing, and workers claim due rows with FOR UPDATE SKIP LOCKED so
-- that no attempt is sent twice.

CREATE TABLE deliveries (
    -- msg_...: also the webhook-id header, stable across retries and replays.
    id              text        PRIMARY KEY,
    -- The company whose subscription or postback URL receives it (history is scoped by it).
    company_id      text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    kind            text        NOT NULL CHECK (kind IN ('webhook', 'postback')),
    -- wh_... for a webhook; the company id for its postback URL.
    target_id       text        NOT NULL,
    -- The URL when the delivery was recorded; an edited subscription sends to its new URL.
    url             text        NOT NULL CHECK (char_length(url) BETWEEN 1 AND 2048),
    event_id        text        NOT NULL,
    event_type      text        NOT NULL,
    -- The exact bytes that are signed and sent on every attempt.
    body            bytea       NOT NULL,
    -- pending: an attempt is due at next_attempt_at; succeeded: a 2xx; failed: retries
    -- exhausted, a 410, or refused (SSRF) — replay and bulk retry make it pending again.
    status          text        NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- Set while pending. The trigger of the next attempt: scheduled or manual.
    next_attempt_at timestamptz NULL,
    next_trigger    text        NOT NULL DEFAULT 'scheduled' CHECK (next_trigger IN ('scheduled', 'manual')),
    last_status     integer     NULL,
    last_error      text        NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    CHECK ((status = 'pending') = (next_attempt_at IS NOT NULL)),
    UNIQUE (event_id, kind, target_id)
);

-- The workers' queue: due pending deliveries, oldest first.
CREATE INDEX deliveries_due_idx ON deliveries (next_attempt_at) WHERE status = 'pending';
-- History: a company's deliveries of one target, newest first (ids are time-sortable).
CREATE INDEX deliveries_history_idx ON deliveries (company_id, kind, target_id, id DESC);
-- Bulk retry: a company's failed deliveries.
CREATE INDEX deliveries_failed_idx ON deliveries (company_id, created_at) WHERE status = 'failed';

CREATE TABLE delivery_attempts (
    delivery_id      text        NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    -- 1, 2, ...: the attempt's number within its delivery.
    n                integer     NOT NULL CHECK (n >= 1),
    trigger          text        NOT NULL CHECK (trigger IN ('scheduled', 'manual')),
    started_at       timestamptz NOT NULL,
    duration_ms      integer     NOT NULL CHECK (duration_ms >= 0),
    -- NULL when no response came (timeout, refused connection, SSRF refusal).
    status_code      integer     NULL,
    error            text        NULL CHECK (char_length(error) <= 1024),
    -- The start of the response body, capped.
    response_excerpt text        NULL CHECK (char_length(response_excerpt) <= 1024),
    PRIMARY KEY (delivery_id, n)
);
