-- Quarter-hour rollups, so that a report by day or by hour in the caller's time zone
-- (docs/stats.md, "Time zones") is exact: every offset a zone has had since 1970, except a few
-- historical ones before 1980, is a whole number of quarter hours (Asia/Kolkata +5:30,
-- Asia/Kathmandu +5:45, Australia/Lord_Howe's half-hour daylight saving), so every local day
-- and hour is a run of whole quarters. Daily rollups cannot serve them: a UTC day splits an
-- Indian one at 05:30.
--
-- Only what the day and hour groupings read: the company and the program. Each row is written
-- twice, once under its advertiser and once under its affiliate (arrayJoin), so that both scopes
-- read a primary-key range; a company id names one company, whichever its kind. Folding in the
-- affiliate or the link instead would make the rollup about as large as clicks itself (a link
-- rarely has two clicks in one quarter).
--
-- Made from scratch on every run, as 0006: the past is copied from the raw tables before the
-- views start adding what ingest writes, so ingest should be stopped while this runs (what it
-- writes in between is stored but missing here).
DROP TABLE IF EXISTS {db}.clicks_quarterly_mv;

DROP TABLE IF EXISTS {db}.clicks_quarterly;

CREATE TABLE IF NOT EXISTS {db}.clicks_quarterly
(
    quarter       DateTime('UTC'),
    company_id    String,
    program_id    String,
    clicks        UInt64,
    unique_clicks UInt64
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(quarter)
ORDER BY (company_id, program_id, quarter);

INSERT INTO {db}.clicks_quarterly (quarter, company_id, program_id, clicks, unique_clicks)
SELECT
    toStartOfFifteenMinutes(occurred_at)        AS quarter,
    arrayJoin([advertiser_id, affiliate_id])    AS company_id,
    program_id,
    count()                                     AS clicks,
    countIf(is_duplicate = 0)                   AS unique_clicks
FROM {db}.clicks
WHERE is_bot = 0
GROUP BY quarter, company_id, program_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.clicks_quarterly_mv TO {db}.clicks_quarterly AS
SELECT
    toStartOfFifteenMinutes(occurred_at)        AS quarter,
    arrayJoin([advertiser_id, affiliate_id])    AS company_id,
    program_id,
    count()                                     AS clicks,
    countIf(is_duplicate = 0)                   AS unique_clicks
FROM {db}.clicks
WHERE is_bot = 0
GROUP BY quarter, company_id, program_id;

-- Conversions by quarter, status and currency, sign-weighted as conversions_daily.
DROP TABLE IF EXISTS {db}.conversions_quarterly_mv;

DROP TABLE IF EXISTS {db}.conversions_quarterly;

CREATE TABLE IF NOT EXISTS {db}.conversions_quarterly
(
    quarter       DateTime('UTC'),
    company_id    String,
    program_id    String,
    currency      String,
    status        String,
    conversions   Int64,
    sale_amount   Decimal(38, 0),
    commission    Decimal(38, 0)
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(quarter)
ORDER BY (company_id, program_id, quarter, currency, status);

INSERT INTO {db}.conversions_quarterly (quarter, company_id, program_id, currency, status, conversions, sale_amount, commission)
SELECT
    toStartOfFifteenMinutes(occurred_at)        AS quarter,
    arrayJoin([advertiser_id, affiliate_id])    AS company_id,
    program_id,
    currency,
    status,
    sum(toInt64(sign))                          AS conversions,
    sum(toDecimal128(sign * amount, 0))         AS sale_amount,
    sum(toDecimal128(sign * commission, 0))     AS commission
FROM {db}.conversion_changes
GROUP BY quarter, company_id, program_id, currency, status;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.conversions_quarterly_mv TO {db}.conversions_quarterly AS
SELECT
    toStartOfFifteenMinutes(occurred_at)        AS quarter,
    arrayJoin([advertiser_id, affiliate_id])    AS company_id,
    program_id,
    currency,
    status,
    sum(toInt64(sign))                          AS conversions,
    sum(toDecimal128(sign * amount, 0))         AS sale_amount,
    sum(toDecimal128(sign * commission, 0))     AS commission
FROM {db}.conversion_changes
GROUP BY quarter, company_id, program_id, currency, status;
