-- Dashboard sessions (internal/session). The access token is a short-lived JWT; this table is
-- what makes a session revocable at once and its refresh token single-use.

CREATE TABLE sessions (
    id           text PRIMARY KEY,
    user_id      text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    company_id   text NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    -- SHA-256 of the current refresh token; the token itself is never stored.
    refresh_hash bytea NOT NULL UNIQUE CHECK (octet_length(refresh_hash) = 32),
    created_at   timestamptz NOT NULL,
    -- Absolute end of the session: refreshing does not extend it.
    expires_at   timestamptz NOT NULL,
    -- Updated on refresh, not on every request, so that verifying a token stays a read.
    last_used_at timestamptz NOT NULL,
    revoked_at   timestamptz NULL,
    user_agent   text NOT NULL DEFAULT '',
    ip           text NOT NULL DEFAULT ''
);

-- "Sign out everywhere" and the cascades from users and companies.
CREATE INDEX sessions_user_id_idx ON sessions (user_id);
CREATE INDEX sessions_company_id_idx ON sessions (company_id);
-- Pruning of ended sessions.
CREATE INDEX sessions_expires_at_idx ON sessions (expires_at);

-- Refresh tokens a session has already rotated away from. Presenting one again means two
-- parties hold the session's tokens (theft), so the session is revoked. Without this table an
-- old token would match no row and the session it was stolen from could not be found.
CREATE TABLE retired_refresh_tokens (
    hash       bytea PRIMARY KEY CHECK (octet_length(hash) = 32),
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    retired_at timestamptz NOT NULL
);

CREATE INDEX retired_refresh_tokens_session_id_idx ON retired_refresh_tokens (session_id);
