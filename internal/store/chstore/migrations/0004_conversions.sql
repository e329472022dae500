-- Conversions change status (pending -> approved -> paid, ...), and a summing rollup cannot
-- forget what it counted before. So ingest writes every change as a pair of rows into
-- conversion_changes: sign -1 with the state it had counted so far (read from conversions),
-- sign +1 with the new state. Summing sign-weighted values then yields the current figures,
-- and the pair goes out in one INSERT. An event whose version is not newer than the stored
-- one (a redelivery, a relay's duplicate, an older change arriving late) writes nothing, so
-- no replay can move a figure. Amounts are integer minor units of currency.
CREATE TABLE IF NOT EXISTS {db}.conversion_changes
(
    conversion_id   String,
    version         UInt64,
    sign            Int8,
    status          String,
    type            String,
    currency        String,
    amount          Int64,
    commission      Int64,
    occurred_at     DateTime('UTC'),
    advertiser_id   String,
    program_id      String,
    affiliate_id    String,
    link_id         String,
    click_id        String,
    sub1            String,
    commission_id   String,
    external_id     String,
    event_id        String,
    kafka_partition Int32,
    kafka_offset    Int64,
    ingested_at     DateTime('UTC')
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(occurred_at)
ORDER BY (advertiser_id, conversion_id, version, sign);

-- The latest state of each conversion: what ingest reads to know what it counted before.
-- Not partitioned, so every version of a conversion collapses into one row on merge; readers
-- still take the highest version, because merges are eventual.
CREATE TABLE IF NOT EXISTS {db}.conversions
(
    conversion_id String,
    version       UInt64,
    status        String,
    type          String,
    currency      String,
    amount        Int64,
    commission    Int64,
    occurred_at   DateTime('UTC'),
    advertiser_id String,
    program_id    String,
    affiliate_id  String,
    link_id       String,
    click_id      String,
    sub1          String,
    commission_id String,
    external_id   String,
    updated_at    DateTime('UTC')
)
ENGINE = ReplacingMergeTree(version)
ORDER BY conversion_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.conversions_mv TO {db}.conversions AS
SELECT conversion_id, version, status, type, currency, amount, commission, occurred_at,
       advertiser_id, program_id, affiliate_id, link_id, click_id, sub1, commission_id,
       external_id, ingested_at AS updated_at
FROM {db}.conversion_changes
WHERE sign > 0;

-- Daily conversion figures by status, in the conversion's currency, on the UTC day the
-- conversion happened. Sign-weighted sums: a status change moves one conversion and its
-- amounts from the old status to the new one.
CREATE TABLE IF NOT EXISTS {db}.conversions_daily
(
    day           Date,
    advertiser_id String,
    affiliate_id  String,
    program_id    String,
    link_id       String,
    sub1          String,
    currency      String,
    status        String,
    conversions   Int64,
    sale_amount   Int64,
    commission    Int64
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (advertiser_id, affiliate_id, program_id, link_id, sub1, currency, status, day);

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.conversions_daily_mv TO {db}.conversions_daily AS
SELECT
    toDate(occurred_at)     AS day,
    advertiser_id,
    affiliate_id,
    program_id,
    link_id,
    sub1,
    currency,
    status,
    sum(toInt64(sign))      AS conversions,
    sum(sign * amount)      AS sale_amount,
    sum(sign * commission)  AS commission
FROM {db}.conversion_changes
GROUP BY day, advertiser_id, affiliate_id, program_id, link_id, sub1, currency, status;
