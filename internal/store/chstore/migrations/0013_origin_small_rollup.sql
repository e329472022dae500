-- The clicks' small dimensions (country, device, browser, OS) leave the long form of 0012 for
-- a rollup of their own that holds them side by side, one row per combination, so that a
-- click costs ClickHouse two rows there (its advertiser's and its affiliate's) rather than
-- eight in clicks_origin_daily. Unfolding a click into twenty (dimension, value) rows was
-- most of what ingest cost ClickHouse (docs/stats.md, "What the rollups by origin cost
-- ingest"); the combinations of the small dimensions are few (about 20 x 4 x 9 x 8 at most
-- a day per company), so a report by one of them reads a few thousand rows a day and sums
-- them. clicks_origin_daily keeps the large dimensions, whose values are too many to be
-- crossed; conversions are few beside clicks and keep all ten in conversions_origin_daily.
--
-- Made from scratch, as 0012: ingest should be stopped while this runs.
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
    clicks        UInt64,
    unique_clicks UInt64
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (company_id, day, country, device_type, browser, os);

INSERT INTO {db}.clicks_origin_small_daily (day, company_id, country, device_type, browser, os, clicks, unique_clicks)
SELECT toDate(occurred_at) AS day, company_id, country, device_type, browser, os,
       count() AS clicks, countIf(is_duplicate = 0) AS unique_clicks
FROM {db}.clicks
ARRAY JOIN [advertiser_id, affiliate_id] AS company_id
WHERE is_bot = 0
GROUP BY day, company_id, country, device_type, browser, os;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.clicks_origin_small_daily_mv TO {db}.clicks_origin_small_daily AS
SELECT toDate(occurred_at) AS day, company_id, country, device_type, browser, os,
       count() AS clicks, countIf(is_duplicate = 0) AS unique_clicks
FROM {db}.clicks
ARRAY JOIN [advertiser_id, affiliate_id] AS company_id
WHERE is_bot = 0
GROUP BY day, company_id, country, device_type, browser, os;

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
    arrayConcat(arrayResize([advertiser_id], 6, advertiser_id), arrayResize([affiliate_id], 6, affiliate_id)) AS company_id,
    ['region',
    'city',
    'asn',
    'referrer',
    'utm_source',
    'utm_campaign',
    'region',
    'city',
    'asn',
    'referrer',
    'utm_source',
    'utm_campaign'] AS dimension,
    [concat(toString(country), '\t', region),
    concat(toString(country), '\t', region, '\t', city),
    concat(toString(asn), '\t', as_org),
    referrer_domain,
    utm_source,
    utm_campaign,
    concat(toString(country), '\t', region),
    concat(toString(country), '\t', region, '\t', city),
    concat(toString(asn), '\t', as_org),
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
    arrayConcat(arrayResize([advertiser_id], 6, advertiser_id), arrayResize([affiliate_id], 6, affiliate_id)) AS company_id,
    ['region',
    'city',
    'asn',
    'referrer',
    'utm_source',
    'utm_campaign',
    'region',
    'city',
    'asn',
    'referrer',
    'utm_source',
    'utm_campaign'] AS dimension,
    [concat(toString(country), '\t', region),
    concat(toString(country), '\t', region, '\t', city),
    concat(toString(asn), '\t', as_org),
    referrer_domain,
    utm_source,
    utm_campaign,
    concat(toString(country), '\t', region),
    concat(toString(country), '\t', region, '\t', city),
    concat(toString(asn), '\t', as_org),
    referrer_domain,
    utm_source,
    utm_campaign] AS value
WHERE is_bot = 0
GROUP BY day, company_id, dimension, value;
