-- Integrations a brand adopts without writing code (docs/integrations.md): the tracking
-- script, and Stripe's events that become conversions and reversals.

-- A publishable key (ps_pk_...) belongs to one program and is good only for the tracking
-- script's click endpoint: it is made to be seen in a web page. Secret keys are as before.
ALTER TABLE api_keys
    ADD COLUMN kind       text NOT NULL DEFAULT 'secret' CHECK (kind IN ('secret', 'publishable')),
    ADD COLUMN program_id text REFERENCES programs (id) ON DELETE CASCADE,
    ADD CHECK ((kind = 'publishable') = (program_id IS NOT NULL));

-- The tracking script's settings of a program: the origins whose pages may register clicks
-- (exact origins, or every subdomain of one: https://*.shop.example), the query parameters
-- that carry a partner's code, and which click a visitor keeps, the first or the last.
CREATE TABLE tracking_scripts (
    program_id text        PRIMARY KEY REFERENCES programs (id) ON DELETE CASCADE,
    origins    text[]      NOT NULL CHECK (cardinality(origins) <= 20),
    params     text[]      NOT NULL CHECK (cardinality(params) BETWEEN 1 AND 5),
    model      text        NOT NULL CHECK (model IN ('first_click', 'last_click')),
    updated_at timestamptz NOT NULL
);

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
