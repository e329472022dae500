-- duplicate_order's index as one expression, the advertiser and the order id in any case
-- (docs/fraud.md, "Benchmark"). As two columns (advertiser_id, lower(external_id)), and as
-- well with the order id first, it cost exactly what conversions_advertiser costs to a
-- planner that has no statistics (a new table, or one autovacuum has not analysed yet), and
-- the generic plan a connection keeps for the insert of a conversion walked every conversion
-- of the advertiser instead. No other index holds this expression, so the read can use no
-- other. Advertiser ids have no space: the text before the first space is the advertiser.
DROP INDEX IF EXISTS conversions_order;
CREATE INDEX conversions_order ON conversions ((advertiser_id || ' ' || lower(external_id)));
