-- Unique clicks are decided by ingest (docs/tracking.md, "Unique clicks"): a click is unique
-- when it is its visitor's first on the link in its UTC hour. Every click carries the keyed
-- hash of its visitor, and Kafka places clicks by it, so one ingest replica at a time owns a
-- visitor's clicks. One ADD COLUMN per statement: a retried migration skips a column that is
-- already there (chstore.apply).
ALTER TABLE {db}.clicks ADD COLUMN visitor String AFTER click_id;

-- The unique clicks by partition and hour: what a replica that takes over a partition (a
-- rebalance, a restart, a rollout) reads back before it decides that partition's clicks of an
-- hour, so the decision does not depend on which replica makes it. Only the current and the
-- previous hour are read; ingest drops days older than yesterday (ClickHouse 18.16 has no TTL).
-- A click stored twice (Kafka is at least once) collapses at merge time; readers need no FINAL
-- because any copy says the same.
CREATE TABLE IF NOT EXISTS {db}.click_visitors
(
    kafka_partition Int32,
    hour            DateTime('UTC'),
    link_id         String,
    visitor         String,
    click_id        String
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(hour)
ORDER BY (kafka_partition, hour, link_id, visitor);

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.click_visitors_mv TO {db}.click_visitors AS
SELECT kafka_partition, toStartOfHour(occurred_at) AS hour, link_id, visitor, click_id
FROM {db}.clicks
WHERE visitor != '' AND is_duplicate = 0;
