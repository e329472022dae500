-- Identity: the companies that use PartnerStream (advertisers and affiliates), their users,
-- and the API keys integrators authenticate with.
--
-- golang-migrate sends this file as one simple-protocol query, which Postgres runs as one
-- implicit transaction: a failure leaves no half-created schema behind.

CREATE TABLE companies (
    id         text PRIMARY KEY,
    kind       text NOT NULL CHECK (kind IN ('advertiser', 'affiliate')),
    name       text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    locale     text NOT NULL DEFAULT 'en' CHECK (locale IN ('en', 'es')),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
    id            text PRIMARY KEY,
    company_id    text NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    email         text NOT NULL,
    name          text NOT NULL DEFAULT '',
    role          text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    locale        text NOT NULL DEFAULT 'en' CHECK (locale IN ('en', 'es')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_login_at timestamptz NULL
);

-- An email logs in to exactly one account whatever its capitalisation.
CREATE UNIQUE INDEX users_email_lower_key ON users (lower(email));
-- Without it, deleting a company (ON DELETE CASCADE) and listing a company's team scan users.
CREATE INDEX users_company_id_idx ON users (company_id);

CREATE TABLE api_keys (
    id           text PRIMARY KEY,
    company_id   text NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    name         text NOT NULL,
    -- The leading characters of the key, kept in clear so a list can tell keys apart.
    prefix       text NOT NULL,
    -- Only the SHA-256 of the key is stored; the length check catches a hex string stored by mistake.
    hash         bytea NOT NULL UNIQUE CHECK (octet_length(hash) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz NULL,
    revoked_at   timestamptz NULL
);

CREATE INDEX api_keys_company_id_idx ON api_keys (company_id);
