-- Partner profiles: what an affiliate tells the brands it works with about itself. The
-- display name is companies.name, so the name shown everywhere is the one the profile edits.
-- The checks repeat the API's limits, so no other writer stores more.
CREATE TABLE partner_profiles (
    company_id   text PRIMARY KEY REFERENCES companies (id) ON DELETE CASCADE,
    website      text NOT NULL DEFAULT '' CHECK (char_length(website) <= 2048),
    -- Audience and promotional methods, as the affiliate describes them.
    audience     text NOT NULL DEFAULT '' CHECK (char_length(audience) <= 2000),
    payout_email text NOT NULL DEFAULT '' CHECK (char_length(payout_email) <= 254),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
