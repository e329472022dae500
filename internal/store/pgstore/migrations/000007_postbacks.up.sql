-- Postback settings of a company (internal/postbacks): the URL that receives a signed POST for
-- every commission status change, and the secret that signs it. One row per company, created
-- the first time a URL is set.
--
-- The secrets are stored as they are, not hashed: the delivery workers need them to compute
-- the HMAC of every postback (Standard Webhooks), so a hash would be useless. Protect this
-- table like the database's credentials (encryption at rest, restricted backups); the API
-- shows a secret only once, when it is created or rotated.

CREATE TABLE company_postbacks (
    company_id          text PRIMARY KEY REFERENCES companies (id) ON DELETE CASCADE,
    -- NULL: no postbacks are sent. The scheme rule (https, or http only to a loopback host)
    -- is checked by the application, the same rule as the Webhook resource's spec.url.
    url                 text        NULL CHECK (char_length(url) BETWEEN 1 AND 2048),
    -- whsec_ + standard base64 of the key (internal/webhooks/signing).
    secret              text        NOT NULL CHECK (secret LIKE 'whsec\_%'),
    -- When the current secret was made: the first URL, or the last rotation.
    secret_created_at   timestamptz NOT NULL,
    -- The secret the last rotation replaced; it keeps signing until previous_expires_at.
    previous_secret     text        NULL CHECK (previous_secret LIKE 'whsec\_%'),
    previous_expires_at timestamptz NULL,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    CHECK ((previous_secret IS NULL) = (previous_expires_at IS NULL))
);

-- Pruning of previous secrets whose grace period has ended.
CREATE INDEX company_postbacks_previous_expires_at_idx ON company_postbacks (previous_expires_at)
    WHERE previous_expires_at IS NOT NULL;
