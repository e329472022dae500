-- Invitations by e-mail (internal/people): to join a company's team with a role, and to join
-- an advertiser's program as an affiliate. They carry no secret: the invitee proves the
-- address by signing in with it (magic code or a verified OAuth address), so nothing here
-- would let a reader of a dump accept one. Open means neither accepted nor revoked; an open
-- invitation past expires_at is refused and listed as expired.

CREATE TABLE team_invitations (
    id          text PRIMARY KEY,
    company_id  text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    -- stored as NormalizeEmail writes it, so it matches users' lower(email)
    email       text        NOT NULL CHECK (email = lower(email) AND char_length(email) BETWEEN 3 AND 254),
    role        text        NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    invited_by  text        NULL REFERENCES users (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    accepted_at timestamptz NULL,
    revoked_at  timestamptz NULL,
    CHECK (expires_at > created_at)
);

-- Inviting an address again renews its open invitation rather than adding one.
CREATE UNIQUE INDEX team_invitations_open_key ON team_invitations (company_id, email)
    WHERE accepted_at IS NULL AND revoked_at IS NULL;
-- A first sign-in looks its address up.
CREATE INDEX team_invitations_open_email_idx ON team_invitations (email)
    WHERE accepted_at IS NULL AND revoked_at IS NULL;

CREATE TABLE affiliate_invitations (
    id            text PRIMARY KEY,
    program_id    text        NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    advertiser_id text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    email         text        NOT NULL CHECK (email = lower(email) AND char_length(email) BETWEEN 3 AND 254),
    invited_by    text        NULL REFERENCES users (id) ON DELETE SET NULL,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    accepted_at   timestamptz NULL,
    -- the affiliate company that accepted it
    accepted_by   text        NULL REFERENCES companies (id) ON DELETE SET NULL,
    revoked_at    timestamptz NULL,
    CHECK (expires_at > created_at)
);

CREATE UNIQUE INDEX affiliate_invitations_open_key ON affiliate_invitations (program_id, email)
    WHERE accepted_at IS NULL AND revoked_at IS NULL;
CREATE INDEX affiliate_invitations_open_email_idx ON affiliate_invitations (email)
    WHERE accepted_at IS NULL AND revoked_at IS NULL;
CREATE INDEX affiliate_invitations_advertiser_idx ON affiliate_invitations (advertiser_id);
