-- Magic codes: the 6-digit sign-in codes sent by e-mail (internal/magiccode).
--
-- Only an HMAC of each code is stored, keyed by a secret pepper held outside the database: a
-- plain hash of a 6-digit code would fall to a million guesses offline. Rows outlive their
-- codes because they are also the record the per-address and per-IP rate limits count; the api
-- deletes them once they are older than every limit window (magiccode.Service.Prune).

CREATE TABLE magic_codes (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Normalised (lower-case) address the code was sent to.
    email       text NOT NULL,
    code_hash   bytea NOT NULL CHECK (octet_length(code_hash) = 32),
    -- Client address that asked for the code; an IPv6 client is stored as its /64, the block
    -- one subscriber usually holds, which is what the per-IP limit counts.
    ip          inet NOT NULL,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    -- Wrong codes tried against this one; at the service's maximum it is locked.
    attempts    integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    consumed_at timestamptz NULL,
    locked_at   timestamptz NULL,
    -- Set when a newer code for the address replaced this one, or when its e-mail could not
    -- be sent: either way no one may use it.
    revoked_at  timestamptz NULL,
    CHECK (expires_at > created_at)
);

-- An address has at most one current code (not consumed, not replaced); verifying locks it.
CREATE UNIQUE INDEX magic_codes_email_current_key ON magic_codes (email)
    WHERE consumed_at IS NULL AND revoked_at IS NULL;
-- The rate limits count recent codes per address and per client IP.
CREATE INDEX magic_codes_email_created_at_idx ON magic_codes (email, created_at);
CREATE INDEX magic_codes_ip_created_at_idx ON magic_codes (ip, created_at);
-- Prune deletes by age.
CREATE INDEX magic_codes_created_at_idx ON magic_codes (created_at);
