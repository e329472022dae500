-- Statistics by where clicks come from (docs/stats.md, "Where clicks come from") count
-- conversions under their click's dimensions, so ingest copies them from the click to the
-- conversion when it attributes the conversion (click_index, then conversion_changes and
-- conversions, whose latest state a status change retracts). Rows stored before this
-- migration, conversions without a click and clicks from before enrichment (0009) read '' and
-- 0. One ADD COLUMN per statement: a retried migration skips a column that is already there
-- (chstore.apply). Columns are named and typed as the clicks' (0001, 0009), so a query reads either
-- table alike and the views insert them as they are.
ALTER TABLE {db}.click_index ADD COLUMN country LowCardinality(String) DEFAULT '';

ALTER TABLE {db}.click_index ADD COLUMN region String DEFAULT '';

ALTER TABLE {db}.click_index ADD COLUMN city String DEFAULT '';

ALTER TABLE {db}.click_index ADD COLUMN asn UInt32 DEFAULT 0;

ALTER TABLE {db}.click_index ADD COLUMN as_org String DEFAULT '';

ALTER TABLE {db}.click_index ADD COLUMN hosting UInt8 DEFAULT 0;

ALTER TABLE {db}.click_index ADD COLUMN device_type String DEFAULT '';

ALTER TABLE {db}.click_index ADD COLUMN browser String DEFAULT '';

ALTER TABLE {db}.click_index ADD COLUMN os String DEFAULT '';

ALTER TABLE {db}.click_index ADD COLUMN referrer_domain String DEFAULT '';

ALTER TABLE {db}.click_index ADD COLUMN utm_source String DEFAULT '';

ALTER TABLE {db}.click_index ADD COLUMN utm_medium String DEFAULT '';

ALTER TABLE {db}.click_index ADD COLUMN utm_campaign String DEFAULT '';

ALTER TABLE {db}.conversion_changes ADD COLUMN country LowCardinality(String) DEFAULT '';

ALTER TABLE {db}.conversion_changes ADD COLUMN region String DEFAULT '';

ALTER TABLE {db}.conversion_changes ADD COLUMN city String DEFAULT '';

ALTER TABLE {db}.conversion_changes ADD COLUMN asn UInt32 DEFAULT 0;

ALTER TABLE {db}.conversion_changes ADD COLUMN as_org String DEFAULT '';

ALTER TABLE {db}.conversion_changes ADD COLUMN hosting UInt8 DEFAULT 0;

ALTER TABLE {db}.conversion_changes ADD COLUMN device_type String DEFAULT '';

ALTER TABLE {db}.conversion_changes ADD COLUMN browser String DEFAULT '';

ALTER TABLE {db}.conversion_changes ADD COLUMN os String DEFAULT '';

ALTER TABLE {db}.conversion_changes ADD COLUMN referrer_domain String DEFAULT '';

ALTER TABLE {db}.conversion_changes ADD COLUMN utm_source String DEFAULT '';

ALTER TABLE {db}.conversion_changes ADD COLUMN utm_medium String DEFAULT '';

ALTER TABLE {db}.conversion_changes ADD COLUMN utm_campaign String DEFAULT '';

ALTER TABLE {db}.conversions ADD COLUMN country LowCardinality(String) DEFAULT '';

ALTER TABLE {db}.conversions ADD COLUMN region String DEFAULT '';

ALTER TABLE {db}.conversions ADD COLUMN city String DEFAULT '';

ALTER TABLE {db}.conversions ADD COLUMN asn UInt32 DEFAULT 0;

ALTER TABLE {db}.conversions ADD COLUMN as_org String DEFAULT '';

ALTER TABLE {db}.conversions ADD COLUMN hosting UInt8 DEFAULT 0;

ALTER TABLE {db}.conversions ADD COLUMN device_type String DEFAULT '';

ALTER TABLE {db}.conversions ADD COLUMN browser String DEFAULT '';

ALTER TABLE {db}.conversions ADD COLUMN os String DEFAULT '';

ALTER TABLE {db}.conversions ADD COLUMN referrer_domain String DEFAULT '';

ALTER TABLE {db}.conversions ADD COLUMN utm_source String DEFAULT '';

ALTER TABLE {db}.conversions ADD COLUMN utm_medium String DEFAULT '';

ALTER TABLE {db}.conversions ADD COLUMN utm_campaign String DEFAULT '';

-- The views carry them on. ClickHouse 18.16 cannot alter a view's query, so each is made
-- again (as in 0005: ingest should be stopped while this runs).
DROP TABLE IF EXISTS {db}.click_index_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.click_index_mv TO {db}.click_index AS
SELECT click_id, occurred_at, link_id, program_id, affiliate_id, advertiser_id, promotion_id, sub1,
       country, region, city, asn, as_org, hosting, device_type, browser, os, referrer_domain,
       utm_source, utm_medium, utm_campaign
FROM {db}.clicks;

DROP TABLE IF EXISTS {db}.conversions_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.conversions_mv TO {db}.conversions AS
SELECT conversion_id, version, revision, status, type, currency, amount, commission, occurred_at,
       advertiser_id, program_id, affiliate_id, link_id, click_id, sub1, commission_id,
       external_id, ingested_at AS updated_at, attribution,
       country, region, city, asn, as_org, hosting, device_type, browser, os, referrer_domain,
       utm_source, utm_medium, utm_campaign
FROM {db}.conversion_changes
WHERE sign > 0;

-- The enriched clicks stored between 0009 and this migration, into click_index again with
-- their dimensions: the engine collapses the copies, and until it merges them a lookup prefers
-- the copy that has dimensions (ingest.Writer.attribute). A retried run only writes copies.
INSERT INTO {db}.click_index (click_id, occurred_at, link_id, program_id, affiliate_id, advertiser_id, promotion_id, sub1,
    country, region, city, asn, as_org, hosting, device_type, browser, os, referrer_domain, utm_source, utm_medium, utm_campaign)
SELECT click_id, occurred_at, link_id, program_id, affiliate_id, advertiser_id, promotion_id, sub1,
       country, region, city, asn, as_org, hosting, device_type, browser, os, referrer_domain, utm_source, utm_medium, utm_campaign
FROM {db}.clicks
WHERE device_type != '' OR country != '' OR asn != 0 OR referrer_domain != '' OR utm_source != '' OR utm_campaign != '';
