-- Fraud rules (internal/fraud, docs/fraud.md): each program's settings of its rules, the
-- partnerships a rule is switched off for, and every rule that fired on a commission.

-- A program's settings, by reason code; a code absent here runs with its default.
CREATE TABLE fraud_settings (
    program_id text PRIMARY KEY REFERENCES programs (id) ON DELETE CASCADE,
    rules      jsonb       NOT NULL CHECK (jsonb_typeof(rules) = 'object'),
    updated_at timestamptz NOT NULL
);

-- A rule switched off for one partnership.
CREATE TABLE fraud_exemptions (
    partnership_id text        NOT NULL REFERENCES partnerships (id) ON DELETE CASCADE,
    code           text        NOT NULL CHECK (length(code) BETWEEN 1 AND 64),
    created_at     timestamptz NOT NULL,
    PRIMARY KEY (partnership_id, code)
);

-- Each rule that fired on a commission: at registration, or later, once the click is known
-- (stage click). A shadow rule's row never acts. One row per rule, shadow or not: a rule
-- decided again later keeps its first verdict.
CREATE TABLE fraud_verdicts (
    commission_id text        NOT NULL REFERENCES commissions (id) ON DELETE CASCADE,
    code          text        NOT NULL CHECK (length(code) BETWEEN 1 AND 64),
    shadow        boolean     NOT NULL,
    action        text        NOT NULL CHECK (action IN ('flag', 'hold')),
    -- what made it fire (seconds, an earlier conversion's id, which address matched); never a
    -- customer's e-mail address
    observed      text        NOT NULL CHECK (length(observed) <= 255),
    stage         text        NOT NULL CHECK (stage IN ('registration', 'click')),
    decided_at    timestamptz NOT NULL,
    PRIMARY KEY (commission_id, code, shadow)
);

-- Set while a rule holds the commission: it is not approved by the hold days and not paid
-- until the advertiser releases it (NULL again) or rejects it.
ALTER TABLE commissions ADD COLUMN held_at timestamptz;
CREATE INDEX commissions_held ON commissions (advertiser_id, held_at) WHERE held_at IS NOT NULL;

-- The keyed hash of the customer's normalised e-mail (internal/fraud.Hasher); the address
-- itself is never stored.
ALTER TABLE conversions ADD COLUMN customer_email_hash bytea;
CREATE INDEX conversions_customer_email ON conversions (program_id, customer_email_hash) WHERE customer_email_hash IS NOT NULL;
-- duplicate_order: the advertiser's order ids, whatever their case.
CREATE INDEX conversions_order ON conversions (advertiser_id, lower(external_id));
