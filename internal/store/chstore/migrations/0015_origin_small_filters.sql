-- Filtered reports (country=, device=, browser=, os=, hosting=) from rollups rather than the
-- raw clicks (docs/stats.md, "Where clicks come from"). The small dimensions' rollup of 0013
-- already holds country, device, browser and OS side by side, so a report grouped by one of
-- them (or by UTC day) and filtered by the others is a sum over its rows; it gains the hosting
-- flag here, which at most doubles its combinations (hosting goes with the network, not with
-- the device), and a click still costs it two rows. Conversions get the same rollup: the long
-- form of 0012 cannot cross two dimensions, and conversions are few beside clicks.
--
-- A large dimension (city, AS, referrer, UTM) is not crossed with these: its values times the
-- combinations would be about a row per click (0012). Filters on it, and filtered reports by
-- program, affiliate, link, sub1, attribution or hour, still read the raw rows.
--
-- Made from scratch, as 0013: ingest should be stopped while this runs.
DROP TABLE IF EXISTS {db}.clicks_origin_small_daily_mv;

DROP TABLE IF EXISTS {db}.clicks_origin_small_daily;

CREATE TABLE IF NOT EXISTS {db}.clicks_origin_small_daily
(
    day           Date,
    company_id    String,
    country       LowCardinality(String),
    device_type   String,
    browser       String,
    os            String,
    hosting       UInt8,
    clicks        UInt64,
    unique_clicks UInt64
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (company_id, day, country, device_type, browser, os, hosting);

INSERT INTO {db}.clicks_origin_small_daily (day, company_id, country, device_type, browser, os, hosting, clicks, unique_clicks)
SELECT toDate(occurred_at) AS day, company_id, country, device_type, browser, os, hosting,
       count() AS clicks, countIf(is_duplicate = 0) AS unique_clicks
FROM {db}.clicks
ARRAY JOIN [advertiser_id, affiliate_id] AS company_id
WHERE is_bot = 0
GROUP BY day, company_id, country, device_type, browser, os, hosting;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.clicks_origin_small_daily_mv TO {db}.clicks_origin_small_daily AS
SELECT toDate(occurred_at) AS day, company_id, country, device_type, browser, os, hosting,
       count() AS clicks, countIf(is_duplicate = 0) AS unique_clicks
FROM {db}.clicks
ARRAY JOIN [advertiser_id, affiliate_id] AS company_id
WHERE is_bot = 0
GROUP BY day, company_id, country, device_type, browser, os, hosting;

-- Conversions by their click's small dimensions (0011), sign-weighted as conversions_daily.
DROP TABLE IF EXISTS {db}.conversions_origin_small_daily_mv;

DROP TABLE IF EXISTS {db}.conversions_origin_small_daily;

CREATE TABLE IF NOT EXISTS {db}.conversions_origin_small_daily
(
    day           Date,
    company_id    String,
    country       LowCardinality(String),
    device_type   String,
    browser       String,
    os            String,
    hosting       UInt8,
    currency      String,
    status        String,
    conversions   Int64,
    sale_amount   Decimal(38, 0),
    commission    Decimal(38, 0)
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (company_id, day, country, device_type, browser, os, hosting, currency, status);

INSERT INTO {db}.conversions_origin_small_daily (day, company_id, country, device_type, browser, os, hosting, currency, status, conversions, sale_amount, commission)
SELECT toDate(occurred_at) AS day, company_id, country, device_type, browser, os, hosting, currency, status,
       sum(toInt64(sign))                      AS conversions,
       sum(toDecimal128(sign * amount, 0))     AS sale_amount,
       sum(toDecimal128(sign * commission, 0)) AS commission
FROM {db}.conversion_changes
ARRAY JOIN [advertiser_id, affiliate_id] AS company_id
GROUP BY day, company_id, country, device_type, browser, os, hosting, currency, status;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.conversions_origin_small_daily_mv TO {db}.conversions_origin_small_daily AS
SELECT toDate(occurred_at) AS day, company_id, country, device_type, browser, os, hosting, currency, status,
       sum(toInt64(sign))                      AS conversions,
       sum(toDecimal128(sign * amount, 0))     AS sale_amount,
       sum(toDecimal128(sign * commission, 0)) AS commission
FROM {db}.conversion_changes
ARRAY JOIN [advertiser_id, affiliate_id] AS company_id
GROUP BY day, company_id, country, device_type, browser, os, hosting, currency, status;
