-- A conversion whose signed click is not in click_index yet is written at once, without the
-- click's sub1, and listed in conversions_awaiting_click; when the click arrives, ingest moves
-- the conversion to the click's sub1 (docs/stats.md, "A conversion's link and sub1"). The move
-- keeps the conversion's version, so a revision orders the states of one version: readers take
-- the highest (version, revision). One ADD COLUMN per statement (as in 0006).
ALTER TABLE {db}.conversion_changes ADD COLUMN revision UInt32 DEFAULT 0;

ALTER TABLE {db}.conversions ADD COLUMN revision UInt32 DEFAULT 0;

-- conversions stays ReplacingMergeTree(version): of rows with equal versions a merge keeps
-- the one inserted last, and a move is always inserted after the state it moves. The view
-- carries the revision on; ClickHouse 18.16 cannot alter a view's query, so it is made again
-- (as in 0005: ingest should be stopped while this runs).
DROP TABLE IF EXISTS {db}.conversions_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.conversions_mv TO {db}.conversions AS
SELECT conversion_id, version, revision, status, type, currency, amount, commission, occurred_at,
       advertiser_id, program_id, affiliate_id, link_id, click_id, sub1, commission_id,
       external_id, ingested_at AS updated_at, attribution
FROM {db}.conversion_changes
WHERE sign > 0;

-- One row (done = 0) per conversion that awaits its click, and a row with done = 1 once the
-- click arrived: the engine keeps the latter, and readers take max(done) meanwhile. Both rows
-- carry the same since, so they share a partition; a month no longer awaited can be dropped.
CREATE TABLE IF NOT EXISTS {db}.conversions_awaiting_click
(
    conversion_id String,
    click_id      String,
    advertiser_id String,
    since         DateTime('UTC'),
    done          UInt8
)
ENGINE = ReplacingMergeTree(done)
PARTITION BY toYYYYMM(since)
ORDER BY conversion_id;
