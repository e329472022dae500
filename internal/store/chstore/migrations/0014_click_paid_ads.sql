-- The paid-ads click ids (gclid, fbclid, msclkid...) a click's landing URL carried,
-- comma-separated, which ingest records (internal/enrich, UTM.PaidAds) for the fraud rule
-- paid_ads_click (docs/fraud.md). Rows stored before it read ''.
ALTER TABLE {db}.clicks ADD COLUMN paid_ads String DEFAULT '';
