-- The click lookup of conversion attribution (internal/conversions): one row per click id,
-- with what a conversion needs from its click. clicks is sorted for statistics (advertiser,
-- program, day), where a lookup by click_id alone would scan a whole table; here click_id is
-- the sorting key, so a lookup reads one granule per partition.
-- Ingest may write a click twice (Kafka is at least once): ReplacingMergeTree collapses the
-- copies at merge time and readers use FINAL. Partitions by month let an operator drop months
-- older than the longest attribution window (365 days).
CREATE TABLE IF NOT EXISTS {db}.click_index
(
    click_id      String,
    occurred_at   DateTime('UTC'),
    link_id       String,
    program_id    String,
    affiliate_id  String,
    advertiser_id String,
    promotion_id  String,
    sub1          String
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(occurred_at)
ORDER BY click_id;

-- Fed by every insert into clicks (only rows inserted after this view exists).
CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.click_index_mv TO {db}.click_index AS
SELECT click_id, occurred_at, link_id, program_id, affiliate_id, advertiser_id, promotion_id, sub1
FROM {db}.clicks;

-- Clicks recorded before the view existed. Running this again (a retried migration) only
-- writes copies that the engine collapses.
INSERT INTO {db}.click_index (click_id, occurred_at, link_id, program_id, affiliate_id, advertiser_id, promotion_id, sub1)
SELECT click_id, occurred_at, link_id, program_id, affiliate_id, advertiser_id, promotion_id, sub1
FROM {db}.clicks;
