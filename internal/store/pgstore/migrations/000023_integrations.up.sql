-- Integrations a brand adopts without writing code (docs/integrations.md): Stripe's events
-- become conversions and reversals.

-- A conversion a Stripe event registered says so.
ALTER TABLE conversions DROP CONSTRAINT conversions_source_check,
    ADD CONSTRAINT conversions_source_check CHECK (source IN ('api', 'postback', 'stripe'));

-- One Stripe endpoint per program. The token in the endpoint's URL is stored hashed, like the
-- postback token; the endpoint secret (whsec_...) is kept as Stripe gave it, since verifying
-- a signature needs it, and is never returned or logged.
CREATE TABLE stripe_integrations (
    program_id      text        PRIMARY KEY REFERENCES programs (id) ON DELETE CASCADE,
    token_hash      bytea       NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    endpoint_secret text        NOT NULL CHECK (endpoint_secret ~ '^whsec_[A-Za-z0-9]{1,200}$'),
    created_at      timestamptz NOT NULL,
    last_event_at   timestamptz
);

-- Every event handled, once: Stripe redelivers, and a redelivery finds its row and changes
-- nothing.
CREATE TABLE stripe_events (
    program_id  text        NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    event_id    text        NOT NULL CHECK (length(event_id) BETWEEN 1 AND 255),
    type        text        NOT NULL,
    outcome     text        NOT NULL,
    received_at timestamptz NOT NULL,
    PRIMARY KEY (program_id, event_id)
);

-- The Stripe objects (payment intents, charges, invoices, checkout sessions) a conversion came
-- from, so that a refund or a dispute, which names a charge or a payment intent, finds it.
CREATE TABLE stripe_payments (
    program_id  text NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    ref         text NOT NULL CHECK (length(ref) BETWEEN 1 AND 255),
    external_id text NOT NULL,
    PRIMARY KEY (program_id, ref)
);

-- A refund or dispute that arrived before the payment it reverses (Stripe does not keep
-- order): the payment's conversion is reversed as soon as it is registered.
CREATE TABLE stripe_reversals (
    program_id  text        NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    ref         text        NOT NULL CHECK (length(ref) BETWEEN 1 AND 255),
    reason      text        NOT NULL,
    received_at timestamptz NOT NULL,
    PRIMARY KEY (program_id, ref)
);
