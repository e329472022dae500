-- Daily rollups of the groupings by where clicks come from (docs/stats.md, "Where clicks
-- come from"), so that a 30-day report by country, city, ASN, referrer, ... reads pre-summed rows
-- rather than the raw clicks. One table for every dimension, in long form: each click is
-- counted once per dimension, as (dimension, value), value being the grouping's key as
-- internal/stats spells it (a city's country, region and city joined by tabs, an AS's number and
-- organisation). A report reads one dimension's primary-key range, so a dimension of a few
-- values (device) costs a few rows per day and one of many (city, referrer, UTM campaign) as
-- many as it has; neither weighs on the other. The program is left out: with it a large
-- dimension's rows would multiply by the programs (a city rarely has two clicks of one program
-- in a day), and a report of one program reads that program's raw clicks, which their sorting
-- key holds. A cube of every dimension together
-- would be about as large as clicks itself. Each row is written under the advertiser and again
-- under the affiliate (arrayJoin), as in 0010, so both scopes read a primary-key range.
--
-- Filters (country=, hosting=, ...) are not served here: a filtered report reads the raw
-- tables (docs/stats.md says which report reads what).
--
-- The rows are unfolded by one ARRAY JOIN of three parallel arrays (each company with each
-- dimension): ClickHouse 18.16 takes one ARRAY JOIN per SELECT, refuses to group by what the
-- arrayJoin function yields from a row's columns, and loses a subquery's aliases when a view
-- pushes a block through it.
--
-- Made from scratch on every run, as 0010: the past is copied from the raw tables before the
-- views start adding what ingest writes, so ingest should be stopped while this runs.
DROP TABLE IF EXISTS {db}.clicks_origin_daily_mv;

DROP TABLE IF EXISTS {db}.clicks_origin_daily;

CREATE TABLE IF NOT EXISTS {db}.clicks_origin_daily
(
    day           Date,
    company_id    String,
    dimension     String,
    value         String,
    clicks        UInt64,
    unique_clicks UInt64
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (company_id, dimension, day, value);

INSERT INTO {db}.clicks_origin_daily (day, company_id, dimension, value, clicks, unique_clicks)
SELECT toDate(occurred_at) AS day, company_id, dimension, value,
       count() AS clicks, countIf(is_duplicate = 0) AS unique_clicks
FROM {db}.clicks
ARRAY JOIN
    arrayConcat(arrayResize([advertiser_id], 10, advertiser_id), arrayResize([affiliate_id], 10, affiliate_id)) AS company_id,
    ['country',
    'region',
    'city',
    'asn',
    'device',
    'browser',
    'os',
    'referrer',
    'utm_source',
    'utm_campaign',
    'country',
    'region',
    'city',
    'asn',
    'device',
    'browser',
    'os',
    'referrer',
    'utm_source',
    'utm_campaign'] AS dimension,
    [toString(country),
    concat(toString(country), '\t', region),
    concat(toString(country), '\t', region, '\t', city),
    concat(toString(asn), '\t', as_org),
    device_type,
    browser,
    os,
    referrer_domain,
    utm_source,
    utm_campaign,
    toString(country),
    concat(toString(country), '\t', region),
    concat(toString(country), '\t', region, '\t', city),
    concat(toString(asn), '\t', as_org),
    device_type,
    browser,
    os,
    referrer_domain,
    utm_source,
    utm_campaign] AS value
WHERE is_bot = 0
GROUP BY day, company_id, dimension, value;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.clicks_origin_daily_mv TO {db}.clicks_origin_daily AS
SELECT toDate(occurred_at) AS day, company_id, dimension, value,
       count() AS clicks, countIf(is_duplicate = 0) AS unique_clicks
FROM {db}.clicks
ARRAY JOIN
    arrayConcat(arrayResize([advertiser_id], 10, advertiser_id), arrayResize([affiliate_id], 10, affiliate_id)) AS company_id,
    ['country',
    'region',
    'city',
    'asn',
    'device',
    'browser',
    'os',
    'referrer',
    'utm_source',
    'utm_campaign',
    'country',
    'region',
    'city',
    'asn',
    'device',
    'browser',
    'os',
    'referrer',
    'utm_source',
    'utm_campaign'] AS dimension,
    [toString(country),
    concat(toString(country), '\t', region),
    concat(toString(country), '\t', region, '\t', city),
    concat(toString(asn), '\t', as_org),
    device_type,
    browser,
    os,
    referrer_domain,
    utm_source,
    utm_campaign,
    toString(country),
    concat(toString(country), '\t', region),
    concat(toString(country), '\t', region, '\t', city),
    concat(toString(asn), '\t', as_org),
    device_type,
    browser,
    os,
    referrer_domain,
    utm_source,
    utm_campaign] AS value
WHERE is_bot = 0
GROUP BY day, company_id, dimension, value;

-- Conversions by their click's origin (0011), sign-weighted as conversions_daily.
DROP TABLE IF EXISTS {db}.conversions_origin_daily_mv;

DROP TABLE IF EXISTS {db}.conversions_origin_daily;

CREATE TABLE IF NOT EXISTS {db}.conversions_origin_daily
(
    day           Date,
    company_id    String,
    dimension     String,
    value         String,
    currency      String,
    status        String,
    conversions   Int64,
    sale_amount   Decimal(38, 0),
    commission    Decimal(38, 0)
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (company_id, dimension, day, value, currency, status);

INSERT INTO {db}.conversions_origin_daily (day, company_id, dimension, value, currency, status, conversions, sale_amount, commission)
SELECT toDate(occurred_at) AS day, company_id, dimension, value, currency, status,
       sum(toInt64(sign))                      AS conversions,
       sum(toDecimal128(sign * amount, 0))     AS sale_amount,
       sum(toDecimal128(sign * commission, 0)) AS commission
FROM {db}.conversion_changes
ARRAY JOIN
    arrayConcat(arrayResize([advertiser_id], 10, advertiser_id), arrayResize([affiliate_id], 10, affiliate_id)) AS company_id,
    ['country',
    'region',
    'city',
    'asn',
    'device',
    'browser',
    'os',
    'referrer',
    'utm_source',
    'utm_campaign',
    'country',
    'region',
    'city',
    'asn',
    'device',
    'browser',
    'os',
    'referrer',
    'utm_source',
    'utm_campaign'] AS dimension,
    [toString(country),
    concat(toString(country), '\t', region),
    concat(toString(country), '\t', region, '\t', city),
    concat(toString(asn), '\t', as_org),
    device_type,
    browser,
    os,
    referrer_domain,
    utm_source,
    utm_campaign,
    toString(country),
    concat(toString(country), '\t', region),
    concat(toString(country), '\t', region, '\t', city),
    concat(toString(asn), '\t', as_org),
    device_type,
    browser,
    os,
    referrer_domain,
    utm_source,
    utm_campaign] AS value
GROUP BY day, company_id, dimension, value, currency, status;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.conversions_origin_daily_mv TO {db}.conversions_origin_daily AS
SELECT toDate(occurred_at) AS day, company_id, dimension, value, currency, status,
       sum(toInt64(sign))                      AS conversions,
       sum(toDecimal128(sign * amount, 0))     AS sale_amount,
       sum(toDecimal128(sign * commission, 0)) AS commission
FROM {db}.conversion_changes
ARRAY JOIN
    arrayConcat(arrayResize([advertiser_id], 10, advertiser_id), arrayResize([affiliate_id], 10, affiliate_id)) AS company_id,
    ['country',
    'region',
    'city',
    'asn',
    'device',
    'browser',
    'os',
    'referrer',
    'utm_source',
    'utm_campaign',
    'country',
    'region',
    'city',
    'asn',
    'device',
    'browser',
    'os',
    'referrer',
    'utm_source',
    'utm_campaign'] AS dimension,
    [toString(country),
    concat(toString(country), '\t', region),
    concat(toString(country), '\t', region, '\t', city),
    concat(toString(asn), '\t', as_org),
    device_type,
    browser,
    os,
    referrer_domain,
    utm_source,
    utm_campaign,
    toString(country),
    concat(toString(country), '\t', region),
    concat(toString(country), '\t', region, '\t', city),
    concat(toString(asn), '\t', as_org),
    device_type,
    browser,
    os,
    referrer_domain,
    utm_source,
    utm_campaign] AS value
GROUP BY day, company_id, dimension, value, currency, status;
