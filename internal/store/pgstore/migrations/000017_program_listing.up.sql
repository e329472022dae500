-- Programs as a listing (docs/programs.md, "The listing"): what affiliates read before joining,
-- the questions an application answers, the brand's onboarding and its test conversions.
ALTER TABLE programs
    ADD COLUMN website    text   NOT NULL DEFAULT '' CHECK (length(website) <= 2048 AND (website = '' OR website ~* '^https?://')),
    ADD COLUMN terms      text   NOT NULL DEFAULT '' CHECK (length(terms) <= 10000),
    ADD COLUMN categories text[] NOT NULL DEFAULT '{}' CHECK (cardinality(categories) <= 3),
    -- [{"text": "...", "required": true}], at most 3 (programs.MaxQuestions)
    ADD COLUMN questions  jsonb  NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(questions) = 'array');

-- The answers as applied, with each question's text: a later edit of the questions does not
-- change what the affiliate answered.
ALTER TABLE partnerships
    ADD COLUMN answers jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(answers) = 'array');

-- A test conversion checks a brand's integration. It is kept apart from conversions so that it
-- never earns a commission, never reaches statistics, exports, payouts or webhooks.
CREATE TABLE test_conversions (
    id            text PRIMARY KEY,
    advertiser_id text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    program_id    text        NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    external_id   text        NOT NULL CHECK (length(external_id) BETWEEN 1 AND 255),
    amount        bigint      NOT NULL CHECK (amount >= 0),
    commission    bigint      NOT NULL CHECK (commission >= 0),
    currency      char(3)     NOT NULL,
    source        text        NOT NULL CHECK (source IN ('api', 'dashboard')),
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX test_conversions_advertiser ON test_conversions (advertiser_id, id);

CREATE TABLE onboarding (
    company_id   text PRIMARY KEY REFERENCES companies (id) ON DELETE CASCADE,
    dismissed_at timestamptz NOT NULL
);
