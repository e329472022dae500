-- Responses of creating POSTs, replayed when a client retries with the same Idempotency-Key.
CREATE TABLE idempotency_keys (
    principal     text        NOT NULL,  -- the API key or user that sent the request
    key           text        NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    method        text        NOT NULL,
    path          text        NOT NULL,
    request_hash  bytea       NOT NULL,
    status        integer,               -- NULL while the first request is in flight
    content_type  text,
    body          bytea,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
