-- What attributed each conversion (click, coupon or customer; docs/conversions.md), for
-- statistics grouped by it (group_by=attribution, docs/stats.md). Conversions ingested before
-- this migration were all attributed by their click, hence the default. One ADD COLUMN per
-- statement: a retried migration skips a column that is already there (chstore.apply).
ALTER TABLE {db}.conversion_changes ADD COLUMN attribution String DEFAULT 'click';

ALTER TABLE {db}.conversions ADD COLUMN attribution String DEFAULT 'click';

-- The latest-state view carries it on. ClickHouse 18.16 cannot alter a view's query, so the
-- view is made again (as in 0005: ingest should be stopped while this runs).
DROP TABLE IF EXISTS {db}.conversions_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.conversions_mv TO {db}.conversions AS
SELECT conversion_id, version, status, type, currency, amount, commission, occurred_at,
       advertiser_id, program_id, affiliate_id, link_id, click_id, sub1, commission_id,
       external_id, ingested_at AS updated_at, attribution
FROM {db}.conversion_changes
WHERE sign > 0;

-- Daily conversion figures by attribution, as conversions_daily by link. Made from scratch
-- on every run, so a retried migration does not count the copy of the past twice: the past
-- is copied before the view starts adding what ingest writes.
DROP TABLE IF EXISTS {db}.conversions_daily_attribution_mv;

DROP TABLE IF EXISTS {db}.conversions_daily_attribution;

CREATE TABLE IF NOT EXISTS {db}.conversions_daily_attribution
(
    day           Date,
    advertiser_id String,
    affiliate_id  String,
    program_id    String,
    attribution   String,
    currency      String,
    status        String,
    conversions   Int64,
    sale_amount   Decimal(38, 0),
    commission    Decimal(38, 0)
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (advertiser_id, affiliate_id, program_id, attribution, currency, status, day);

INSERT INTO {db}.conversions_daily_attribution (day, advertiser_id, affiliate_id, program_id, attribution, currency,
    status, conversions, sale_amount, commission)
SELECT
    toDate(occurred_at)                     AS day,
    advertiser_id,
    affiliate_id,
    program_id,
    attribution,
    currency,
    status,
    sum(toInt64(sign))                      AS conversions,
    sum(toDecimal128(sign * amount, 0))     AS sale_amount,
    sum(toDecimal128(sign * commission, 0)) AS commission
FROM {db}.conversion_changes
GROUP BY day, advertiser_id, affiliate_id, program_id, attribution, currency, status;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.conversions_daily_attribution_mv TO {db}.conversions_daily_attribution AS
SELECT
    toDate(occurred_at)                     AS day,
    advertiser_id,
    affiliate_id,
    program_id,
    attribution,
    currency,
    status,
    sum(toInt64(sign))                      AS conversions,
    sum(toDecimal128(sign * amount, 0))     AS sale_amount,
    sum(toDecimal128(sign * commission, 0)) AS commission
FROM {db}.conversion_changes
GROUP BY day, advertiser_id, affiliate_id, program_id, attribution, currency, status;
