-- Conversions, their commissions, payouts, and the per-program postback tokens
-- (internal/conversions). Money: integer minor units of the ISO 4217 currency beside them.

-- Payouts come first: commissions point at the payout that gathered them.
CREATE TABLE payouts (
    id               text PRIMARY KEY,
    advertiser_id    text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    affiliate_id     text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    currency         char(3)     NOT NULL,
    -- commissions whose conversion occurred in [period_start, period_end)
    period_start     timestamptz NOT NULL,
    period_end       timestamptz NOT NULL,
    -- the exact sum of the gathered commissions, kept after a failed or canceled payout
    -- released them, as the record of what was attempted
    amount           bigint      NOT NULL CHECK (amount >= 0),
    commission_count integer     NOT NULL CHECK (commission_count > 0),
    status           text        NOT NULL CHECK (status IN ('pending', 'paid', 'failed', 'canceled')),
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    CHECK (period_end > period_start)
);
CREATE INDEX payouts_advertiser ON payouts (advertiser_id, id);
CREATE INDEX payouts_affiliate ON payouts (affiliate_id, id);

CREATE TABLE conversions (
    id             text PRIMARY KEY,
    program_id     text        NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    advertiser_id  text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    affiliate_id   text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    -- NULL when the partnership was deleted after the click; the commission was computed then
    partnership_id text        REFERENCES partnerships (id) ON DELETE SET NULL,
    -- from the click (ClickHouse); not foreign keys, as links may be deleted later
    link_id        text        NOT NULL,
    click_id       text        NOT NULL,
    promotion_id   text        NOT NULL DEFAULT '',
    sub1           text        NOT NULL DEFAULT '',
    clicked_at     timestamptz NOT NULL,
    external_id    text        NOT NULL CHECK (length(external_id) BETWEEN 1 AND 255),
    type           text        NOT NULL CHECK (type IN ('sale', 'lead', 'signup', 'install', 'custom')),
    amount         bigint      NOT NULL CHECK (amount >= 0),
    currency       char(3)     NOT NULL,
    occurred_at    timestamptz NOT NULL,
    -- a JSON object; the API caps it at 16 KB, this is the backstop (jsonb text is a bit larger)
    metadata       jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object' AND octet_length(metadata::text) <= 32768),
    -- api or postback
    source         text        NOT NULL CHECK (source IN ('api', 'postback')),
    created_at     timestamptz NOT NULL,
    -- the advertiser's order id is unique per program: a repeat returns the first conversion
    UNIQUE (program_id, external_id)
);
CREATE INDEX conversions_advertiser ON conversions (advertiser_id, id);
CREATE INDEX conversions_affiliate ON conversions (affiliate_id, id);

CREATE TABLE commissions (
    id            text PRIMARY KEY,
    conversion_id text        NOT NULL UNIQUE REFERENCES conversions (id) ON DELETE CASCADE,
    -- copied from the conversion so that lists and payouts need no join
    program_id    text        NOT NULL,
    advertiser_id text        NOT NULL,
    affiliate_id  text        NOT NULL,
    occurred_at   timestamptz NOT NULL,
    amount        bigint      NOT NULL CHECK (amount >= 0),
    currency      char(3)     NOT NULL,
    -- the rule that produced amount: fixed minor units, or percent in basis points
    rule_type     text        NOT NULL CHECK (rule_type IN ('fixed', 'percent')),
    rule_value    bigint      NOT NULL CHECK (rule_value >= 0),
    status        text        NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'paid', 'reversed')),
    -- why it was rejected or reversed, as the advertiser said
    reason        text        NOT NULL DEFAULT '' CHECK (length(reason) <= 500),
    -- pending commissions are approved automatically from then on; NULL: only by hand
    hold_until    timestamptz,
    -- the payout gathering it: set while approved (pending payout) or paid
    payout_id     text        REFERENCES payouts (id),
    -- increases with every change, so event consumers keep the latest
    version       bigint      NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    CHECK (payout_id IS NULL OR status IN ('approved', 'paid')),
    CHECK (status <> 'paid' OR payout_id IS NOT NULL)
);
CREATE INDEX commissions_advertiser ON commissions (advertiser_id, id);
CREATE INDEX commissions_affiliate ON commissions (affiliate_id, id);
CREATE INDEX commissions_payout ON commissions (payout_id) WHERE payout_id IS NOT NULL;
-- auto-approval after the hold
CREATE INDEX commissions_due ON commissions (hold_until) WHERE status = 'pending' AND hold_until IS NOT NULL;
-- what a new payout can gather
CREATE INDEX commissions_payable ON commissions (advertiser_id, affiliate_id, currency, occurred_at)
    WHERE status = 'approved' AND payout_id IS NULL;

-- The secret of a program's server-to-server postback URL (GET /postback?token=...). Only its
-- SHA-256 is kept: the token is shown once, when it is made, and rotating replaces it.
CREATE TABLE program_postback_tokens (
    program_id text PRIMARY KEY REFERENCES programs (id) ON DELETE CASCADE,
    token_hash bytea       NOT NULL CHECK (length(token_hash) = 32),
    created_at timestamptz NOT NULL
);
