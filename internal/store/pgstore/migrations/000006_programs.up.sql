-- Programs, promotions, partnerships, tracking links, and the transactional outbox.
-- Money: integer minor units (cents; yen have none) with the ISO 4217 currency beside them.
-- Percentages: basis points (1250 = 12.50 %).

CREATE TABLE programs (
    id                      text PRIMARY KEY,
    advertiser_id           text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    name                    text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    description             text        NOT NULL DEFAULT '' CHECK (length(description) <= 5000),
    landing_url             text        NOT NULL CHECK (length(landing_url) <= 2048 AND landing_url ~* '^https?://'),
    -- immutable once created: amounts already recorded are in this currency
    currency                char(3)     NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    commission_type         text        NOT NULL CHECK (commission_type IN ('fixed', 'percent')),
    -- fixed: minor units of currency per conversion; percent: basis points of the sale amount
    commission_value        bigint      NOT NULL CHECK (commission_value > 0),
    attribution_window_days integer     NOT NULL DEFAULT 30 CHECK (attribution_window_days BETWEEN 1 AND 365),
    hold_days               integer     CHECK (hold_days BETWEEN 0 AND 365),
    visibility              text        NOT NULL DEFAULT 'approval' CHECK (visibility IN ('public', 'approval')),
    status                  text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'archived')),
    click_param             text        NOT NULL DEFAULT 'ps_click_id' CHECK (click_param ~ '^[A-Za-z0-9_.-]{1,64}$'),
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    CHECK (commission_type <> 'percent' OR commission_value <= 10000)
);
CREATE INDEX programs_advertiser ON programs (advertiser_id, id);
CREATE INDEX programs_public ON programs (id) WHERE visibility = 'public' AND status = 'active';

CREATE TABLE promotions (
    id           text PRIMARY KEY,
    program_id   text        NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    title        text        NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
    landing_url  text        CHECK (length(landing_url) <= 2048 AND landing_url ~* '^https?://'),
    coupon_code  text        CHECK (length(coupon_code) <= 64),
    starts_at    timestamptz,
    ends_at      timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (ends_at IS NULL OR starts_at IS NULL OR ends_at > starts_at)
);
CREATE INDEX promotions_program ON promotions (program_id, id);

CREATE TABLE partnerships (
    id                        text PRIMARY KEY,
    program_id                text        NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    affiliate_id              text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    advertiser_id             text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    status                    text        NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'suspended')),
    -- per-partnership commission override; both NULL means the program's rule
    commission_type           text        CHECK (commission_type IN ('fixed', 'percent')),
    commission_value          bigint      CHECK (commission_value > 0),
    message                   text        NOT NULL DEFAULT '' CHECK (length(message) <= 2000),
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now(),
    UNIQUE (program_id, affiliate_id),
    CHECK ((commission_type IS NULL) = (commission_value IS NULL)),
    CHECK (commission_type IS DISTINCT FROM 'percent' OR commission_value <= 10000)
);
CREATE INDEX partnerships_affiliate ON partnerships (affiliate_id, id);
CREATE INDEX partnerships_advertiser ON partnerships (advertiser_id, id);

CREATE TABLE tracking_links (
    id              text PRIMARY KEY,
    code            text        NOT NULL UNIQUE CHECK (code ~ '^[A-Za-z0-9]{8,32}$'),
    partnership_id  text        NOT NULL REFERENCES partnerships (id) ON DELETE CASCADE,
    program_id      text        NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    affiliate_id    text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    advertiser_id   text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    promotion_id    text        REFERENCES promotions (id) ON DELETE SET NULL,
    destination_url text        CHECK (length(destination_url) <= 2048),
    sub1 text NOT NULL DEFAULT '' CHECK (length(sub1) <= 255),
    sub2 text NOT NULL DEFAULT '' CHECK (length(sub2) <= 255),
    sub3 text NOT NULL DEFAULT '' CHECK (length(sub3) <= 255),
    sub4 text NOT NULL DEFAULT '' CHECK (length(sub4) <= 255),
    sub5 text NOT NULL DEFAULT '' CHECK (length(sub5) <= 255),
    status          text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tracking_links_affiliate ON tracking_links (affiliate_id, id);
CREATE INDEX tracking_links_program ON tracking_links (program_id);

-- Domain events, written in the transaction of the change and published to Kafka by the
-- relay (internal/outbox). id orders publication; event_id is the envelope's evt_ id.
-- envelope is json, not jsonb, so the bytes published are the bytes the producer encoded.
CREATE TABLE outbox (
    id            bigserial PRIMARY KEY,
    event_id      text        NOT NULL UNIQUE,
    type          text        NOT NULL,
    aggregate_id  text        NOT NULL,
    envelope      json        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    published_at  timestamptz
);
CREATE INDEX outbox_unpublished ON outbox (id) WHERE published_at IS NULL;
CREATE INDEX outbox_published ON outbox (published_at) WHERE published_at IS NOT NULL;
