-- duplicate_order's index, chosen whatever the statistics (docs/fraud.md, "Benchmark").
-- (advertiser_id, lower(external_id)), and the order id first as well, cost what
-- conversions_advertiser costs to a planner without statistics (a new table, or one
-- autovacuum has not analysed yet), and the generic plan a connection keeps for the insert of
-- a conversion walked every conversion of the advertiser. The advertiser column compares in
-- the "C" collation (ids are ASCII), which the read names too: conversions_advertiser, in the
-- database's collation, cannot serve that comparison. Partial, with the predicate the read
-- repeats (every external id has a character), it is also cheaper than the other indexes. An
-- expression of a partial index gets no statistics from ANALYZE: the statistics object gives
-- lower(external_id) its own, so that an analysed table estimates one row, not 0.5 %.
DROP INDEX IF EXISTS conversions_order;
CREATE INDEX conversions_order ON conversions (lower(external_id), advertiser_id COLLATE "C") WHERE external_id <> '';
CREATE STATISTICS conversions_order_id ON (lower(external_id)) FROM conversions;
-- Statistics taken while the table is nearly empty (autovacuum analyses a new table after 50
-- changes) cost a scan of its page or two below any index, and every connection keeps that
-- plan for the insert as the table grows, until the next analysis: a minute later, or
-- thousands of conversions. Never analysed, the planner estimates from the table's actual size
-- and uses the indexes. So autovacuum first analyses the conversions after 10,000 changes.
ALTER TABLE conversions SET (autovacuum_analyze_threshold = 10000);
