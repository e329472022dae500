-- Weekly rollups beside the conversions' daily rollups by origin (0012, 0015), so that a
-- 30-day report by a large dimension (city, region, AS, referrer, UTM: thousands of values a
-- day) reads the conversions of its whole weeks as one row per value, currency, status and
-- week rather than seven (docs/stats.md, "Where clicks come from"); the days before its first
-- Monday and after its last whole week still come from the daily rollups. The clicks' daily
-- rollups have none: their weekly views cost ClickHouse about 4 us more per click at ingest
-- (docs/stats.md, "Filtered reports and whole weeks"), four times the budget, where these run
-- per conversion change. Any 30 days hold three or four whole weeks, so a report reads 6 to
-- 12 rows per value instead of 30, whichever days it asks for (a monthly rollup would serve
-- a calendar month, and no other 30 days).
--
-- Each is fed by a view on its daily rollup's view, not on the raw tables: it runs on what
-- that view inserts, already summed within the insert, not on every conversion change
-- unfolded once per dimension. It selects FROM the daily view, not the daily table: ClickHouse
-- 18.16 does not run the views of a table that another view writes TO, but does run the views
-- of that view. They are built from the daily rollups, which also keep the days whose raw
-- rows retention dropped.
--
-- Weeks start on Mondays (toMonday), named by their Monday in `week`. Made from scratch, as
-- 0013: ingest should be stopped while this runs (what it writes in between is stored in the
-- daily rollups but missing here).

DROP TABLE IF EXISTS {db}.conversions_origin_weekly_mv;

DROP TABLE IF EXISTS {db}.conversions_origin_weekly;

CREATE TABLE IF NOT EXISTS {db}.conversions_origin_weekly
(
    week          Date,
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
PARTITION BY toYYYYMM(week)
ORDER BY (company_id, dimension, week, value, currency, status);

INSERT INTO {db}.conversions_origin_weekly (week, company_id, dimension, value, currency, status, conversions, sale_amount, commission)
SELECT toMonday(day) AS week, company_id, dimension, value, currency, status, sum(conversions) AS conversions, sum(sale_amount) AS sale_amount, sum(commission) AS commission
FROM {db}.conversions_origin_daily
GROUP BY week, company_id, dimension, value, currency, status;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.conversions_origin_weekly_mv TO {db}.conversions_origin_weekly AS
SELECT toMonday(day) AS week, company_id, dimension, value, currency, status, sum(conversions) AS conversions, sum(sale_amount) AS sale_amount, sum(commission) AS commission
FROM {db}.conversions_origin_daily_mv
GROUP BY week, company_id, dimension, value, currency, status;

DROP TABLE IF EXISTS {db}.conversions_origin_small_weekly_mv;

DROP TABLE IF EXISTS {db}.conversions_origin_small_weekly;

CREATE TABLE IF NOT EXISTS {db}.conversions_origin_small_weekly
(
    week          Date,
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
PARTITION BY toYYYYMM(week)
ORDER BY (company_id, week, country, device_type, browser, os, hosting, currency, status);

INSERT INTO {db}.conversions_origin_small_weekly (week, company_id, country, device_type, browser, os, hosting, currency, status, conversions, sale_amount, commission)
SELECT toMonday(day) AS week, company_id, country, device_type, browser, os, hosting, currency, status, sum(conversions) AS conversions, sum(sale_amount) AS sale_amount, sum(commission) AS commission
FROM {db}.conversions_origin_small_daily
GROUP BY week, company_id, country, device_type, browser, os, hosting, currency, status;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.conversions_origin_small_weekly_mv TO {db}.conversions_origin_small_weekly AS
SELECT toMonday(day) AS week, company_id, country, device_type, browser, os, hosting, currency, status, sum(conversions) AS conversions, sum(sale_amount) AS sale_amount, sum(commission) AS commission
FROM {db}.conversions_origin_small_daily_mv
GROUP BY week, company_id, country, device_type, browser, os, hosting, currency, status;
