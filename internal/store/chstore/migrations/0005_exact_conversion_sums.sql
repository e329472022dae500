-- Sale amounts and commissions are summed into Decimal(38, 0) instead of Int64: one amount
-- may be up to 2^63-1 minor units, so a day of a few large conversions wrapped the Int64 sums
-- (96 commissions of 999,999,999,999,999.99 read as a negative total). Decimal(38, 0) holds
-- 2^64 such amounts exactly, and ClickHouse refuses a Decimal overflow instead of wrapping.
-- The rollup and the view both sum: the view within one insert, the SummingMergeTree when
-- it merges parts, so both change. ClickHouse 18.16 cannot alter a view's query, and a view
-- whose sums do not match its target's types fails every insert into conversion_changes, so
-- the view is dropped first and created again once the columns are wide. Conversion changes
-- ingested in between (while the ALTER rewrites two columns of the pre-summed rollup, usually
-- well under a second) are stored but not rolled up, so ingest should be stopped while this
-- migration runs (docs/stats.md). Each statement can run again.
DROP TABLE IF EXISTS {db}.conversions_daily_mv;

ALTER TABLE {db}.conversions_daily
    MODIFY COLUMN sale_amount Decimal(38, 0),
    MODIFY COLUMN commission Decimal(38, 0);

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.conversions_daily_mv TO {db}.conversions_daily AS
SELECT
    toDate(occurred_at)                   AS day,
    advertiser_id,
    affiliate_id,
    program_id,
    link_id,
    sub1,
    currency,
    status,
    sum(toInt64(sign))                    AS conversions,
    sum(toDecimal128(sign * amount, 0))     AS sale_amount,
    sum(toDecimal128(sign * commission, 0)) AS commission
FROM {db}.conversion_changes
GROUP BY day, advertiser_id, affiliate_id, program_id, link_id, sub1, currency, status;
