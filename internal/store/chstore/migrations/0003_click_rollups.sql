-- Daily click rollups, so a 30-day stats query reads thousands of pre-summed rows instead of
-- millions of clicks. Rows of one key are summed at merge time; queries still sum() because
-- parts merge in the background. Days are UTC. Bot clicks (is_bot) are kept in clicks for
-- audit but counted nowhere; unique clicks are those the tracker did not flag as a repeat of
-- the same visitor (is_duplicate), which keeps them additive across days and groups.
--
-- Two rollups because sub1 is free text chosen by affiliates: folding it into the link rollup
-- could make that one as large as clicks itself. A link determines its program and affiliate,
-- so clicks_daily serves the day, program, affiliate and link groupings.
CREATE TABLE IF NOT EXISTS {db}.clicks_daily
(
    day           Date,
    advertiser_id String,
    affiliate_id  String,
    program_id    String,
    link_id       String,
    clicks        UInt64,
    unique_clicks UInt64
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (advertiser_id, affiliate_id, program_id, link_id, day);

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.clicks_daily_mv TO {db}.clicks_daily AS
SELECT
    toDate(occurred_at)       AS day,
    advertiser_id,
    affiliate_id,
    program_id,
    link_id,
    count()                   AS clicks,
    countIf(is_duplicate = 0) AS unique_clicks
FROM {db}.clicks
WHERE is_bot = 0
GROUP BY day, advertiser_id, affiliate_id, program_id, link_id;

CREATE TABLE IF NOT EXISTS {db}.clicks_daily_sub1
(
    day           Date,
    advertiser_id String,
    affiliate_id  String,
    program_id    String,
    sub1          String,
    clicks        UInt64,
    unique_clicks UInt64
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (advertiser_id, affiliate_id, program_id, sub1, day);

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.clicks_daily_sub1_mv TO {db}.clicks_daily_sub1 AS
SELECT
    toDate(occurred_at)       AS day,
    advertiser_id,
    affiliate_id,
    program_id,
    sub1,
    count()                   AS clicks,
    countIf(is_duplicate = 0) AS unique_clicks
FROM {db}.clicks
WHERE is_bot = 0
GROUP BY day, advertiser_id, affiliate_id, program_id, sub1;
