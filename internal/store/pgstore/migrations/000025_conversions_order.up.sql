-- duplicate_order's index, chosen whatever the statistics (docs/fraud.md, "Benchmark").
-- (advertiser_id, lower(external_id)) cost exactly what conversions_advertiser costs to a
-- planner without statistics (a new table, or one autovacuum has not analysed yet), in the
-- order id first as well, and the generic plan a connection keeps for the insert of a
-- conversion walked every conversion of the advertiser. As a partial index whose predicate
-- the read repeats (every external id is at least one character), it is the cheaper one. An
-- expression of a partial index gets no statistics from ANALYZE: the statistics object gives
-- lower(external_id) its own, so that an analysed table estimates one row, not 0.5 %.
DROP INDEX IF EXISTS conversions_order;
CREATE INDEX conversions_order ON conversions (lower(external_id), advertiser_id) WHERE external_id <> '';
CREATE STATISTICS conversions_order_id ON (lower(external_id)) FROM conversions;
