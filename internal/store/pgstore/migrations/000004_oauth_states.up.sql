-- Social login (OpenID Connect): one row per authorization flow in progress, so that any api
-- replica can finish a flow another one started, and a state works only once.
--
-- Only the SHA-256 of the state is stored: the state travels in URLs and a cookie, and a copy of
-- this table must not be enough to complete someone else's login. The nonce and PKCE verifier
-- are needed in clear to finish the flow; they are worthless without the browser's state.
CREATE TABLE oauth_states (
    state_hash    bytea PRIMARY KEY CHECK (octet_length(state_hash) = 32),
    provider      text NOT NULL,
    nonce         text NOT NULL,
    code_verifier text NOT NULL,
    -- Where the browser goes after the login: always a path on our own site.
    return_to     text NOT NULL,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    consumed_at   timestamptz NULL
);

-- Starting a flow prunes the expired ones.
CREATE INDEX oauth_states_expires_at_idx ON oauth_states (expires_at);
