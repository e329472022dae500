-- The clicks as the reports that no rollup holds read them (docs/stats.md, "Where clicks come
-- from"): a filter on a large dimension (AS, referrer, UTM), a filtered report grouped by
-- program, affiliate, link, sub1 or hour, and the partial UTC days at the edges of a range in
-- a zone whose days are not UTC days. Those read every click of the company's days, and in
-- `clicks` reading and comparing the advertiser's String alone was most of a report's time.
-- Here a click keeps only the columns those reports read, its strings as LowCardinality
-- (compared through their dictionary), bots left out, and its day as a column (a range of whole
-- UTC days compares dates rather than computing one from every click's time); the sorting key
-- puts the days straight after the advertiser, so a range of days is one primary-key range
-- whatever the programs. The copy costs ingest (docs/stats.md, "Benchmarks"); `clicks` stays
-- the record, with the address, the user agent and the rest.
--
-- Partitioned by month, as clicks: retention drops both (internal/ingest). Made from scratch,
-- as 0013: ingest should be stopped while this runs (what it writes in between is stored in
-- clicks but missing here).
DROP TABLE IF EXISTS {db}.clicks_narrow_mv;

DROP TABLE IF EXISTS {db}.clicks_narrow;

CREATE TABLE IF NOT EXISTS {db}.clicks_narrow
(
    day             Date,
    occurred_at     DateTime('UTC'),
    advertiser_id   LowCardinality(String),
    affiliate_id    LowCardinality(String),
    program_id      LowCardinality(String),
    link_id         LowCardinality(String),
    sub1            String,
    is_duplicate    UInt8,
    country         LowCardinality(String),
    region          LowCardinality(String),
    city            LowCardinality(String),
    asn             UInt32,
    as_org          LowCardinality(String),
    hosting         UInt8,
    device_type     LowCardinality(String),
    browser         LowCardinality(String),
    os              LowCardinality(String),
    referrer_domain LowCardinality(String),
    utm_source      LowCardinality(String),
    utm_campaign    LowCardinality(String)
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (advertiser_id, day, program_id);

INSERT INTO {db}.clicks_narrow
SELECT toDate(occurred_at), occurred_at, toLowCardinality(advertiser_id), toLowCardinality(affiliate_id), toLowCardinality(program_id),
       toLowCardinality(link_id), sub1, is_duplicate, country, toLowCardinality(region), toLowCardinality(city), asn,
       toLowCardinality(as_org), hosting, toLowCardinality(device_type), toLowCardinality(browser), toLowCardinality(os),
       toLowCardinality(referrer_domain), toLowCardinality(utm_source), toLowCardinality(utm_campaign)
FROM {db}.clicks
WHERE is_bot = 0;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.clicks_narrow_mv TO {db}.clicks_narrow AS
SELECT toDate(occurred_at) AS day, occurred_at, toLowCardinality(advertiser_id) AS advertiser_id, toLowCardinality(affiliate_id) AS affiliate_id,
       toLowCardinality(program_id) AS program_id, toLowCardinality(link_id) AS link_id, sub1, is_duplicate, country,
       toLowCardinality(region) AS region, toLowCardinality(city) AS city, asn, toLowCardinality(as_org) AS as_org, hosting,
       toLowCardinality(device_type) AS device_type, toLowCardinality(browser) AS browser, toLowCardinality(os) AS os,
       toLowCardinality(referrer_domain) AS referrer_domain, toLowCardinality(utm_source) AS utm_source,
       toLowCardinality(utm_campaign) AS utm_campaign
FROM {db}.clicks
WHERE is_bot = 0;
