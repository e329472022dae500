-- Raw click events, one row per tracking-link redirect, written by ingest from the
-- partnerstream.clicks topic. Kafka delivers at least once, so the same click can arrive twice:
-- with click_id closing the sorting key, ReplacingMergeTree collapses such replays into one row
-- at merge time. Until a merge has run, read with FINAL or count uniqExact(click_id).
-- The sorting key leads with advertiser and program because every stats query filters on them.
-- kafka_partition and kafka_offset record where the row came from, to audit or replay ingest.
CREATE TABLE IF NOT EXISTS {db}.clicks
(
    click_id        String,
    occurred_at     DateTime('UTC'),
    link_id         String,
    program_id      String,
    affiliate_id    String,
    advertiser_id   String,
    promotion_id    String,
    sub1            String,
    sub2            String,
    sub3            String,
    sub4            String,
    sub5            String,
    ip              String,
    user_agent      String,
    referrer        String,
    country         LowCardinality(String),
    is_bot          UInt8,
    is_duplicate    UInt8,
    kafka_partition Int32,
    kafka_offset    Int64
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(occurred_at)
ORDER BY (advertiser_id, program_id, toDate(occurred_at), click_id);
