ALTER TABLE conversions RESET (autovacuum_analyze_threshold);
DROP STATISTICS IF EXISTS conversions_order_id;
DROP INDEX IF EXISTS conversions_order;
CREATE INDEX conversions_order ON conversions (advertiser_id, lower(external_id));
